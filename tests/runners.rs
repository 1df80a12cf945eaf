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
    // A python3 in isolated mode (-I -S: no site-packages, so no pytest) makes the choice
    // certain on any machine; it also ignores PYTHONDONTWRITEBYTECODE, so the test run leaves
    // __pycache__ under tests/, which must not block the next commit.
    let bin = env.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let python = which("python3");
    std::fs::write(
        bin.join("python3"),
        format!("#!/bin/sh\nexec {} -I -S \"$@\"\n", python.display()),
    )
    .unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(bin.join("python3"))
            .unwrap()
            .permissions(),
        0o755,
    );
    let mut perms = std::fs::metadata(bin.join("python3"))
        .unwrap()
        .permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(bin.join("python3"), perms).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());

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
        .env("PATH", path)
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

fn which(program: &str) -> std::path::PathBuf {
    std::env::var("PATH")
        .unwrap()
        .split(':')
        .map(|dir| std::path::Path::new(dir).join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
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
