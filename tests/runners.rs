//! Test commands are detected from the repository and real runners' output is read for the
//! names of failing tests.

use crate::common::*;
use serde_json::json;

/// A Node project whose add() subtracts, tested by `npm test` with node's runner, with
/// `test` (a path and its text).
fn node_calc(env: &TestEnv, test: (&str, &str)) -> std::path::PathBuf {
    env.repo(
        "js",
        &[
            (
                "package.json",
                r#"{"name": "calc", "private": true, "scripts": {"test": "node --test"}}"#,
            ),
            ("calc.js", "exports.add = (a, b) => a - b;\n"),
            test,
        ],
    )
}

#[test]
fn an_npm_project_is_tested_with_npm_test_and_node_failures_are_named() {
    let env = TestEnv::new();
    let repo = node_calc(
        &env,
        (
            "calc.test.js",
            "const { test } = require('node:test');\nconst assert = require('node:assert');\n\
                 const { add } = require('./calc');\n\ntest('adds two numbers', () => {\n  \
                 assert.strictEqual(add(2, 3), 5);\n});\n\ntest('adds zero', () => {\n  \
                 assert.strictEqual(add(0, 0), 0);\n});\n",
        ),
    );
    let script = env.script("r.json", json!([end_turn("Nothing to do.")]));
    let out = env.fix(&repo, &script, "agent/js", &["--max-turns", "1"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let report = env.message(&repo, "agent/js");
    assert!(
        report.contains("Tests (npm test): 1 passed, 1 failed"),
        "{report}"
    );
    assert!(
        report.contains("  adds two numbers: Expected values to be strictly equal:"),
        "{report}"
    );
}

#[test]
fn python_without_pytest_uses_the_builtin_runner() {
    let env = TestEnv::new();
    let repo = env.repo(
        "py",
        &[
            ("pkg/__init__.py", ""),
            ("pkg/calc.py", CALC),
            (
                "tests/test_calc.py",
                "from pkg.calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
            ),
        ],
    );
    let fix = tool(
        "f",
        "edit_file",
        json!({"path": "pkg/calc.py", "old_text": "return a - b", "new_text": "return a + b"}),
    );
    let script = env.script(
        "r.json",
        json!([calls("Fix.", vec![fix]), end_turn("Done.")]),
    );
    let model = format!("script:{}", script.display());
    let out = env
        .agent_cmd(
            &repo,
            &["fix", "--model", &model, "--branch", "agent/py", "--json"],
        )
        .env("PATH", python_without_pytest(&env))
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let report = env.message(&repo, "agent/py");
    assert!(
        report.contains("Tests (built-in Python runner): 1 passed, 0 failed"),
        "{report}"
    );
    assert!(
        stderr(&out).contains("tests before any change: 0 passed, 1 failed"),
        "{}",
        stderr(&out)
    );
}

/// A Python project run by `agent-git fix` with a model that changes nothing, where python3
/// has no pytest: (exit code, report) of the built-in runner's verdict on the tests as they
/// are.
fn builtin_verdict(env: &TestEnv, files: &[(&str, &str)]) -> (i32, String) {
    let repo = env.repo("py", files);
    let path = python_without_pytest(env);
    let run = env.fix_scripted_with(
        &repo,
        "agent/py",
        json!([end_turn("Nothing to do.")]),
        &["--max-turns", "1"],
        |cmd| {
            cmd.env("PATH", &path);
        },
    );
    (run.code(), env.message(&repo, "agent/py"))
}

const TEST_MULTIPLY: &str =
    "from calc import multiply\n\n\ndef test_multiply():\n    assert multiply(4, 5) == 20\n";

#[test]
fn the_builtin_runner_runs_star_test_files_as_pytest_does() {
    let env = TestEnv::new();
    let (code, report) = builtin_verdict(
        &env,
        &[
            ("calc.py", CALC),
            ("tests/test_multiply.py", TEST_MULTIPLY),
            (
                "tests/calc_test.py",
                "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
            ),
        ],
    );
    assert_eq!(code, 1, "{report}");
    assert!(
        report.contains("Tests (built-in Python runner): 1 passed, 1 failed")
            && report.contains("tests/calc_test.py::test_add"),
        "{report}"
    );
}

#[test]
fn the_builtin_runner_runs_plain_test_classes_as_pytest_does() {
    let env = TestEnv::new();
    let test_calc = concat!(
        "from calc import add\n\n\n",
        "class TestAdd:\n",
        "    def setup_method(self):\n",
        "        self.two = 2\n\n",
        "    def test_two_and_three(self):\n",
        "        assert add(self.two, 3) == 5\n",
    );
    let (code, report) = builtin_verdict(
        &env,
        &[
            ("calc.py", CALC),
            ("tests/test_multiply.py", TEST_MULTIPLY),
            ("tests/test_calc.py", test_calc),
        ],
    );
    assert_eq!(code, 1, "{report}");
    assert!(
        report.contains("Tests (built-in Python runner): 1 passed, 1 failed")
            && report.contains("tests/test_calc.py::TestAdd::test_two_and_three"),
        "{report}"
    );
}

#[test]
fn the_builtin_runner_runs_doctest_files_as_pytest_does() {
    let env = TestEnv::new();
    // pytest's --doctest-glob is test*.txt, in every folder it enters: one test per file.
    let usage = "Adding:\n\n>>> from calc import add\n>>> add(2, 3)\n5\n";
    let (code, report) = builtin_verdict(
        &env,
        &[
            ("calc.py", CALC),
            ("tests/test_multiply.py", TEST_MULTIPLY),
            ("docs/test_usage.txt", usage),
        ],
    );
    assert_eq!(code, 1, "{report}");
    assert!(
        report.contains("Tests (built-in Python runner): 1 passed, 1 failed")
            && report.contains("docs/test_usage.txt::test_usage.txt"),
        "{report}"
    );
}

#[test]
fn the_builtin_runner_fails_a_run_whose_setup_module_or_teardown_module_raises() {
    let env = TestEnv::new();
    let raising = |hook: &str, why: &str| {
        format!("{TEST_MULTIPLY}\n\ndef {hook}():\n    raise RuntimeError({why:?})\n")
    };
    let (code, report) = builtin_verdict(
        &env,
        &[
            ("calc.py", CALC_FIXED),
            ("test_setup.py", &raising("setup_module", "no database")),
            (
                "test_teardown.py",
                &raising("teardown_module", "cannot clean up"),
            ),
        ],
    );
    assert_eq!(code, 1, "{report}");
    assert!(
        report.contains("Tests (built-in Python runner): 0 passed, 2 failed")
            && report.contains("test_setup.py::test_multiply")
            && report.contains("test_teardown.py::test_multiply"),
        "{report}"
    );
}

/// The built-in runner run by python3 in `files`' project, as the clean room runs it:
/// (exit code, output, whether it wrote a results file).
fn run_builtin_runner(files: &[(&str, &str)]) -> (i32, String, bool) {
    let project = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = project.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let results = project.path().join("results.json");
    let runner = concat!(env!("CARGO_MANIFEST_DIR"), "/src/testrun/runner.py");
    let out = std::process::Command::new(which("python3"))
        .args(["-I", "-S", runner])
        .current_dir(project.path())
        .env("AGENT_GIT_RESULTS", &results)
        .output()
        .unwrap();
    (code(&out), stdout(&out) + &stderr(&out), results.exists())
}

const NEEDS_PYTEST: &str = "agent-git-runner: needs pytest: ";

#[test]
fn the_builtin_runner_stops_at_a_test_that_takes_fixtures() {
    let (code, output, wrote_results) = run_builtin_runner(&[
        ("test_ok.py", "def test_ok():\n    pass\n"),
        (
            "tests/test_io.py",
            "def test_writes(tmp_path):\n    (tmp_path / 'out').write_text('x')\n",
        ),
    ]);
    let why = "tests/test_io.py::test_writes takes fixture arguments (tmp_path)";
    let stopped = (5, format!("{NEEDS_PYTEST}{why}\n"), false);
    assert_eq!((code, output, wrote_results), stopped);
}

#[test]
fn the_builtin_runner_stops_at_what_only_pytest_honours() {
    let test_ok = ("test_ok.py", "def test_ok():\n    pass\n");
    let parametrized = concat!(
        "import pytest\n\n\n",
        "@pytest.mark.parametrize('n', [1, 2])\n",
        "def test_n(n):\n",
        "    assert n\n",
    );
    for (file, why) in [
        (
            ("conftest.py", "import os\n"),
            "conftest.py: pytest loads conftest.py files (fixtures, hooks, plugins)",
        ),
        (
            ("test_n.py", parametrized),
            "test_n.py imports pytest (line 1)",
        ),
        (
            (
                "pyproject.toml",
                "[tool.pytest.ini_options]\naddopts = \"-W error\"\n",
            ),
            "pyproject.toml has pytest settings ([tool.pytest.ini_options])",
        ),
        (
            (
                "test_plugins.py",
                "pytest_plugins = ['pytester']\n\n\ndef test_plugged():\n    pass\n",
            ),
            "test_plugins.py names pytest_plugins for pytest to load",
        ),
        (
            (
                "test_usage.txt",
                ">>> getfixture('tmp_path').is_dir()\nTrue\n",
            ),
            "test_usage.txt calls getfixture, which pytest gives its doctests (line 1)",
        ),
    ] {
        let (code, output, wrote_results) = run_builtin_runner(&[test_ok, file]);
        let stopped = (5, format!("{NEEDS_PYTEST}{why}\n"), false);
        assert_eq!((code, output, wrote_results), stopped);
    }
}

/// The built-in runner's output on `files`, where it fails the run as pytest does: exit 1,
/// each test it ran and each file it could not import in the results.
fn builtin_failure(files: &[(&str, &str)]) -> String {
    let (code, output, wrote_results) = run_builtin_runner(files);
    assert_eq!((code, wrote_results), (1, true), "{output}");
    output
}

const PAIR: &str = "def pair():\n    return (1, 2)\n";

fn test_pair(import: &str) -> String {
    format!("{import}\n\n\ndef test_pair():\n    assert pair() == (1, 2)\n")
}

#[test]
fn the_builtin_runner_imports_a_test_file_outside_packages_by_its_bare_name_as_pytest_does() {
    // pytest's prepend import mode: both are the module test_calc, so the second is refused.
    let output = builtin_failure(&[
        ("tests/unit/test_calc.py", "def test_unit():\n    pass\n"),
        (
            "tests/integration/test_calc.py",
            "def test_integration():\n    pass\n",
        ),
    ]);
    assert!(
        output.contains("tests/integration/test_calc.py::test_integration PASSED\n")
            && output.contains("ERROR tests/unit/test_calc.py - import file mismatch: "),
        "{output}"
    );
}

#[test]
fn the_builtin_runner_puts_a_package_of_tests_on_sys_path_from_above_as_pytest_does() {
    // tests/ is a package: pytest puts the root on sys.path, never tests/ itself.
    let output = builtin_failure(&[
        ("tests/__init__.py", ""),
        ("tests/helpers.py", PAIR),
        ("tests/test_pair.py", &test_pair("from helpers import pair")),
    ]);
    assert!(
        output
            .contains("ERROR tests/test_pair.py - ModuleNotFoundError: No module named 'helpers'"),
        "{output}"
    );
}

#[test]
fn the_builtin_runner_gives_a_test_file_outside_packages_no_package_as_pytest_does() {
    let output = builtin_failure(&[
        ("tests/helpers.py", PAIR),
        (
            "tests/test_pair.py",
            &test_pair("from .helpers import pair"),
        ),
    ]);
    let why = "ImportError: attempted relative import with no known parent package";
    assert!(
        output.contains(&format!("ERROR tests/test_pair.py - {why}")),
        "{output}"
    );
}

#[test]
fn the_builtin_runner_sets_up_a_package_from_its_init_as_pytest_does() {
    let ok = "def test_ok():\n    pass\n";
    let output = builtin_failure(&[
        (
            "tests/__init__.py",
            "def setup_module():\n    raise RuntimeError('no database')\n",
        ),
        ("tests/test_db.py", ok),
        ("test_top.py", ok),
    ]);
    assert!(
        output.contains("test_top.py::test_ok PASSED\n")
            && output.contains("ERROR tests/test_db.py::test_ok - RuntimeError: no database"),
        "{output}"
    );
}

/// A real fix, in the default sandbox, with the runner users have: each project fixed, every
/// test of the inventory run, the verdict `passed`.
fn fixed_in_the_default_sandbox(
    env: &TestEnv,
    repo: &std::path::Path,
    fix: serde_json::Value,
    path: &str,
) -> String {
    let run = env.fix_scripted_with(
        repo,
        "agent/real",
        json!([calls("Fix.", vec![fix]), end_turn("Done.")]),
        &[],
        |cmd| {
            cmd.env("PATH", path);
        },
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(env
        .message(repo, "agent/real")
        .contains("Sandbox: no network"));
    run.stderr()
}

#[test]
fn a_node_project_is_fixed_and_every_test_is_held_to_the_inventory() {
    let env = TestEnv::new();
    let repo = node_calc(
        &env,
        (
            "test/calc.test.js",
                "const { describe, it } = require('node:test');\nconst assert = require('node:assert');\n\
                 const { add } = require('../calc');\n\ndescribe('add', () => {\n  it('adds two numbers', () => {\n    \
                 assert.strictEqual(add(2, 3), 5);\n  });\n  it('adds zero', () => {\n    \
                 assert.strictEqual(add(0, 0), 0);\n  });\n});\n",
        ),
    );
    let fix = tool(
        "f",
        "edit_file",
        json!({"path": "calc.js", "old_text": "a - b", "new_text": "a + b"}),
    );
    let said = fixed_in_the_default_sandbox(&env, &repo, fix, &std::env::var("PATH").unwrap());
    assert!(said.contains("(2 tests in the inventory)"), "{said}");
    assert!(env
        .message(&repo, "agent/real")
        .contains("Tests (npm test): 2 passed, 0 failed"));
}

#[test]
fn a_python_project_in_a_venv_is_fixed_with_its_pytest() {
    let env = TestEnv::new();
    let repo = env.repo(
        "py",
        &[
            ("calc/__init__.py", ""),
            ("calc/ops.py", CALC),
            (
                "tests/test_ops.py",
                "import pytest\nfrom calc.ops import add\n\n\n@pytest.mark.parametrize('a, b, total', [(2, 3, 5), (0, 0, 0)])\ndef test_add(a, b, total):\n    assert add(a, b) == total\n",
            ),
        ],
    );
    let fix = tool(
        "f",
        "edit_file",
        json!({"path": "calc/ops.py", "old_text": "return a - b", "new_text": "return a + b"}),
    );
    let said = fixed_in_the_default_sandbox(&env, &repo, fix, &pytest_path());
    assert!(
        said.contains("tests before any change: 1 passed, 1 failed (2 tests in the inventory)"),
        "{said}"
    );
    assert!(env
        .message(&repo, "agent/real")
        .contains("Tests (python3 -m pytest -q): 2 passed, 0 failed"));
}

/// The source of a crate as cargo unpacked it into the user's registry (a dependency of
/// agent-git's own, so on every machine that built it), as `(path, text)` pairs.
fn registry_crate(prefix: &str) -> Vec<(String, String)> {
    let home = std::path::PathBuf::from(std::env::var("HOME").unwrap());
    let cargo_home = std::env::var("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| home.join(".cargo"));
    let src = cargo_home.join("registry/src");
    let dir = std::fs::read_dir(&src)
        .unwrap()
        .flatten()
        .flat_map(|index| std::fs::read_dir(index.path()).unwrap().flatten())
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .unwrap_or_else(|| {
            panic!(
                "no {prefix}* under {}: build agent-git first",
                src.display()
            )
        });
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(&dir).into_iter().flatten() {
        if entry.file_type().is_file() {
            let rel = entry.path().strip_prefix(&dir).unwrap();
            let text = std::fs::read_to_string(entry.path()).unwrap();
            files.push((rel.display().to_string(), text));
        }
    }
    files
}

#[test]
fn a_published_crate_whose_optional_dependency_is_never_built_is_fixed_offline() {
    let env = TestEnv::new();
    // enumflags2 as published: `serde` is an optional dependency that cargo resolves from the
    // user's index but never builds, and there is no network in the sandbox.
    let mut files = registry_crate("enumflags2-0.7.");
    // Its published Cargo.lock pins versions this machine never downloaded; without one, cargo
    // takes what the user's cache holds, as for a project the user has built before.
    files.retain(|(path, _)| path != "Cargo.lock");
    let (_, lib) = files.iter_mut().find(|(p, _)| p == "src/lib.rs").unwrap();
    let right = "(self.bits() & other.bits()) == other.bits()";
    let wrong = "(self.bits() & other.bits()) != Self::EMPTY.val";
    assert!(lib.contains(right));
    *lib = lib.replace(right, wrong);
    files.push((".gitignore".into(), "target/\n".into()));
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let repo = env.repo("enumflags2", &borrowed);
    let fix = tool(
        "f",
        "edit_file",
        json!({"path": "src/lib.rs", "old_text": wrong, "new_text": right}),
    );
    let home = std::env::var("HOME").unwrap();
    let run = env.fix_scripted_with(
        &repo,
        "agent/crate",
        json!([
            calls("contains() asks for every flag.", vec![fix]),
            end_turn("Done.")
        ]),
        &[],
        |cmd| {
            cmd.env("HOME", &home);
        },
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stderr().contains(" 1 failed, 2 skipped (")
            && run.stderr().contains(" tests in the inventory)"),
        "every unit and doc test is named: {}",
        run.stderr()
    );
    let report = env.message(&repo, "agent/crate");
    assert!(report.contains("Sandbox: no network"), "{report}");
    assert!(
        report.contains("Tests (cargo test --no-fail-fast): ") && report.contains(" 0 failed"),
        "{report}"
    );
    let (passed, output) = export_and_test(
        &env,
        &repo,
        "agent/crate",
        &format!("HOME={home} CARGO_NET_OFFLINE=true cargo test"),
        &std::env::var("PATH").unwrap(),
    );
    assert!(passed, "{output}");
}

#[test]
fn a_venv_inside_the_project_is_found_where_the_tests_get_a_fresh_tmp() {
    let env = TestEnv::new();
    let repo = env.repo(
        "py",
        &[
            ("calc.py", CALC),
            ("test_calc.py", TEST_CALC),
            (".gitignore", ".venv/\n"),
        ],
    );
    // `python3 -m venv .venv` in the checkout, with pytest in it, activated: the checkout is
    // hidden from the tests and lies under /tmp, which they get fresh; its venv stays.
    let venv = repo.join(".venv");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success());
    let with_pytest = std::path::PathBuf::from(pytest_path().split(':').next().unwrap());
    let site = |venv: &std::path::Path| {
        std::fs::read_dir(venv.join("lib"))
            .unwrap()
            .flatten()
            .next()
            .unwrap()
            .path()
            .join("site-packages")
    };
    let from = site(with_pytest.parent().unwrap());
    let to = site(&venv);
    let copied = std::process::Command::new("cp")
        .arg("-r")
        .arg(format!("{}/.", from.display()))
        .arg(&to)
        .status()
        .unwrap();
    assert!(copied.success());
    let fix = tool(
        "f",
        "edit_file",
        json!({"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}),
    );
    let path = format!(
        "{}/bin:{}",
        venv.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = env.fix_scripted_with(
        &repo,
        "agent/venv",
        json!([calls("Fix.", vec![fix]), end_turn("Done.")]),
        &[],
        |cmd| {
            cmd.env("PATH", &path).env("VIRTUAL_ENV", &venv);
        },
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stderr()
            .contains("tests before any change: 1 passed, 1 failed (2 tests in the inventory)"),
        "{}",
        run.stderr()
    );
    assert!(env
        .message(&repo, "agent/venv")
        .contains("Tests (python3 -m pytest -q): 2 passed, 0 failed"));
}

#[test]
fn the_builtin_runner_captures_stdin_and_logging_as_pytest_does() {
    let env = TestEnv::new();
    // Under pytest stdin cannot be read and the root logger has a handler already: both
    // tests fail there, so they must fail here too.
    let (code, report) = builtin_verdict(
        &env,
        &[
            ("calc.py", CALC),
            (
                "test_io.py",
                "import logging\n\n\ndef test_configures_logging():\n    \
                 logging.basicConfig(level=logging.INFO)\n    \
                 assert logging.getLogger().level == logging.INFO\n\n\n\
                 def test_reads_stdin():\n    try:\n        input()\n    except EOFError:\n        pass\n",
            ),
        ],
    );
    assert_eq!(code, 1, "{report}");
    assert!(report.contains("0 passed, 2 failed"), "{report}");
}
