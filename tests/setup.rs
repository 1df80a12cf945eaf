//! Usage and setup errors exit 2 before any branch exists; settings come from the documented
//! sources in the documented order.

use crate::common::*;
use serde_json::json;
use std::collections::BTreeSet;

fn assert_setup_error(env: &TestEnv, repo: &std::path::Path, args: &[&str], message: &str) {
    let before = repo
        .join(".git")
        .exists()
        .then(|| UserState::capture(env, repo));
    let out = env.agent(repo, args);
    assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
    assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
    assert_eq!(stdout(&out), "");
    if let Some(before) = before {
        assert_eq!(UserState::capture(env, repo), before);
        assert_eq!(
            env.git(repo, &["branch", "--list", "agent/*"]),
            "",
            "no branch was created"
        );
        assert!(
            !repo.join(".git/agent-git").exists()
                || std::fs::read_dir(repo.join(".git/agent-git"))
                    .unwrap()
                    .count()
                    == 0
        );
    }
}

#[test]
fn setup_errors_exit_2_and_create_nothing() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let script = env.script("r.json", json!([end_turn("Done.")]));
    let model = format!("script:{}", script.display());
    let m = model.as_str();

    let plain = env.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    assert_setup_error(
        &env,
        &plain,
        &["fix", "--model", m],
        "is not inside a git repository",
    );

    let empty = env.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    env.git(&empty, &["init", "-q"]);
    let out = env.agent(&empty, &["fix", "--model", m]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("has no commits yet"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        env.git(&empty, &["for-each-ref"]),
        "",
        "no branch was created"
    );

    assert_setup_error(
        &env,
        &repo,
        &["fix", "--model", m, "--base", "nope"],
        "unknown base revision `nope`",
    );
    assert_setup_error(
        &env,
        &repo,
        &["fix"],
        "no model given; pass --model anthropic:MODEL",
    );
    assert_setup_error(
        &env,
        &repo,
        &["fix", "--model", "gpt"],
        "is not a model spec",
    );
    assert_setup_error(
        &env,
        &repo,
        &["fix", "--model", "openai:gpt-4.1"],
        "OPENAI_API_KEY is not set",
    );
    assert_setup_error(
        &env,
        &repo,
        &["fix", "--model", "magic:x"],
        "unknown model provider `magic`",
    );
    assert_setup_error(
        &env,
        &repo,
        &["fix", "--model", "script:/nonexistent.json"],
        "cannot read the script",
    );
    let bad = env.path().join("bad.json");
    std::fs::write(&bad, r#"[{"stop_reason": "sleep", "content": []}]"#).unwrap();
    let bad_model = format!("script:{}", bad.display());
    assert_setup_error(
        &env,
        &repo,
        &["fix", "--model", &bad_model],
        "has an unknown stop_reason in reply 1",
    );
    std::fs::write(&bad, r#"{"stop_reason": "end_turn"}"#).unwrap();
    assert_setup_error(
        &env,
        &repo,
        &["fix", "--model", &bad_model],
        "is not a JSON array of replies",
    );
    assert_setup_error(
        &env,
        &repo,
        &["fix", "--model", m, "--branch", "main"],
        "branch `main` already exists",
    );
    assert_setup_error(
        &env,
        &repo,
        &["fix", "--model", m, "--branch", "a..b"],
        "is not a valid branch name",
    );
    assert_setup_error(
        &env,
        &repo,
        &["fix", "--model", m, "--max-turns", "0"],
        "--max-turns",
    );
    assert_setup_error(
        &env,
        &repo,
        &["fix", "--model", m, "--protect", "src/{a"],
        "bad protected pattern",
    );

    let docs = env.repo("docs", &[("README.md", "# hi\n")]);
    assert_setup_error(
        &env,
        &docs,
        &["fix", "--model", m],
        "cannot tell how to run this repository's tests",
    );
}

#[test]
fn settings_come_from_flags_then_env_then_git_config_then_agentgit() {
    let env = TestEnv::new();
    let unittest_calc = "import unittest\nfrom calc import add\n\n\nclass TestCalc(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n";
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", unittest_calc),
            (".agentgit", "[agent-git]\n\ttestCmd = python3 -m unittest -v\n\tmaxTurns = 1\n\tmodel = script:/team/does-not-exist.json\n"),
        ],
    );
    let from_config = env.script("config.json", json!([end_turn("config model")]));
    let from_env = env.script("env.json", json!([end_turn("env model")]));
    env.git(
        &repo,
        &[
            "config",
            "agent-git.model",
            &format!("script:{}", from_config.display()),
        ],
    );

    // git config beats .agentgit for the model; .agentgit supplies the test command and budget.
    let out = env.agent(&repo, &["fix", "--branch", "agent/a"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let report = env.message(&repo, "agent/a");
    assert!(
        report.contains(&format!("Model: script:{}", from_config.display())),
        "{report}"
    );
    assert!(
        report.contains("Tests (python3 -m unittest -v): 0 passed, 1 failed"),
        "{report}"
    );
    assert!(
        report.contains("test_calc.TestCalc.test_add: AssertionError: -1 != 5"),
        "{report}"
    );
    assert!(report.contains("Turns: 1 of 1"), "{report}");

    // The environment beats git config; a flag beats the environment.
    let out = env
        .agent_cmd(&repo, &["fix", "--branch", "agent/b"])
        .env("AGENT_GIT_MODEL", format!("script:{}", from_env.display()))
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(env.message(&repo, "agent/b").contains("env.json"));
    let out = env
        .agent_cmd(
            &repo,
            &[
                "fix",
                "--branch",
                "agent/c",
                "--max-turns",
                "3",
                "--model",
                &format!("script:{}", from_config.display()),
            ],
        )
        .env("AGENT_GIT_MODEL", format!("script:{}", from_env.display()))
        .output()
        .unwrap();
    assert_eq!(
        code(&out),
        3,
        "one reply, three turns allowed: {}",
        stderr(&out)
    );
    assert!(env.message(&repo, "agent/c").contains("config.json"));
}

#[test]
fn a_test_command_that_hangs_is_killed_at_its_timeout() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let script = env.script("r.json", json!([end_turn("Done.")]));
    let started = std::time::Instant::now();
    let out = env.fix(
        &repo,
        &script,
        "agent/slow",
        &[
            "--test-cmd",
            "sleep 60",
            "--test-timeout",
            "1",
            "--max-turns",
            "1",
        ],
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    let report = env.message(&repo, "agent/slow");
    assert!(
        report.contains("Tests (sleep 60): timed out after 1 s"),
        "{report}"
    );
    assert_eq!(env.trailer(&repo, "agent/slow", "Agent-Tests"), "failed");
}

/// The flags of `agent-git fix --help`, and the codes of its exit-code table.
fn help_contract(env: &TestEnv) -> (BTreeSet<String>, BTreeSet<String>) {
    let out = env.agent(env.path(), &["fix", "--help"]);
    assert_eq!(code(&out), 0);
    let help = stdout(&out);
    let flags = help
        .lines()
        .map(|l| {
            let l = l.trim_start();
            // A flag with a short form too: `-v, --verbose`.
            match l.split_once(", ") {
                Some((short, long))
                    if short.len() == 2 && short.starts_with('-') && long.starts_with("--") =>
                {
                    long
                }
                _ => l,
            }
        })
        .filter_map(|l| l.strip_prefix("--"))
        .filter_map(|l| l.split([' ', '<']).next())
        .filter(|f| *f != "help")
        .map(|f| format!("--{f}"))
        .collect();
    let codes = help
        .split("Exit codes:")
        .nth(1)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_string)
        .collect();
    (flags, codes)
}

#[test]
fn the_readme_and_help_name_the_same_options_and_exit_codes() {
    let env = TestEnv::new();
    // The reference in docs/ holds the tables the README points to.
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/reference.md")).unwrap();
    let table_rows = |heading: &str| -> Vec<String> {
        let section = readme.split(heading).nth(1).unwrap();
        section
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .map(|l| {
                l.split('|')
                    .nth(1)
                    .unwrap()
                    .trim()
                    .trim_matches('`')
                    .to_string()
            })
            .collect()
    };
    let flag_of = |cell: &String| cell.split([' ', '`']).next().unwrap().to_string();
    let mut readme_flags: BTreeSet<String> = table_rows("`agent-git fix [TASK] [OPTIONS]`")
        .iter()
        .map(flag_of)
        .collect();
    // The settings' flags are in the settings table, which the definitions write.
    readme_flags.extend(
        table_rows("### Settings")
            .iter()
            .filter(|cell| cell.starts_with("--"))
            .map(flag_of),
    );
    let readme_codes: BTreeSet<String> = table_rows("## Exit codes").into_iter().collect();
    let (flags, codes) = help_contract(&env);
    assert_eq!(
        readme_flags, flags,
        "the README's option table and `fix --help`"
    );
    assert_eq!(
        readme_codes, codes,
        "the README's exit codes and `fix --help`"
    );
}

/// The README's settings table is the one the settings' definitions write, and `--help`
/// gives each setting's key and default as its definition does.
#[test]
fn the_settings_table_and_help_are_the_definitions() {
    let reference =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/reference.md")).unwrap();
    let table = agent_git::settings::table();
    assert!(
        reference.contains(&format!("### Settings\n\n{table}")),
        "the settings table of docs/reference.md (under `### Settings`) is not what the \
         definitions say; it should be:\n{table}"
    );
    let env = TestEnv::new();
    let out = env.agent(env.path(), &["fix", "--help"]);
    let help = stdout(&out)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for definition in agent_git::settings::definitions() {
        let Some(flag) = definition.flag else {
            continue;
        };
        assert!(
            help.contains(&format!("--{flag} <{}>", definition.value_name)),
            "{flag}"
        );
        assert!(
            help.contains(&definition.help()),
            "{flag}: {}",
            definition.help()
        );
        if let Some(default) = definition.default {
            assert!(definition
                .help()
                .ends_with(&format!("[default: {default}]")));
        }
    }
}

/// A committed `.agentgit` that includes another file is refused, by `fix` and by `check`:
/// its relative include would be looked up beside the copy agent-git reads, in a temp dir
/// anyone can write to, where `testCmd = true` would make failing tests pass.
#[test]
fn a_committed_config_that_includes_another_file_is_refused() {
    let env = TestEnv::new();
    let tmp = env.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(tmp.join("planted"), "[agent-git]\n\ttestCmd = true\n").unwrap();
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", TEST_CALC),
            (
                ".agentgit",
                "[agent-git]\n\tmaxTurns = 1\n[include]\n\tpath = planted\n",
            ),
        ],
    );
    let script = env.script("end.json", json!([end_turn("Done.")]));
    let model = format!("script:{}", script.display());
    // A usage error for fix; for check, a commit whose tests could not be run.
    for (args, exit) in [
        (&["fix", "--branch", "agent/inc", "--model", &model][..], 2),
        (&["check"][..], 4),
    ] {
        let out = env
            .agent_cmd(&repo, args)
            .env("TMPDIR", &tmp)
            .output()
            .unwrap();
        let said = format!("{}{}", stdout(&out), stderr(&out));
        assert_eq!(code(&out), exit, "{args:?}: {said}");
        assert!(
            said.contains(".agentgit has an [include] section"),
            "{said}"
        );
    }
    assert!(env
        .git(&repo, &["branch", "--list", "agent/inc"])
        .trim()
        .is_empty());
}

/// ARCHITECTURE.md is the map of the code: every module `src/lib.rs` declares is in its table,
/// and it names none that is gone.
#[test]
fn the_architecture_names_every_module_of_the_library() {
    let root = env!("CARGO_MANIFEST_DIR");
    let lib = std::fs::read_to_string(format!("{root}/src/lib.rs")).unwrap();
    let modules: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect();
    assert!(modules.len() > 20, "{modules:?}");
    let map = std::fs::read_to_string(format!("{root}/ARCHITECTURE.md")).unwrap();
    let named: BTreeSet<String> = map
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect();
    assert_eq!(
        named, modules,
        "ARCHITECTURE.md's module table and src/lib.rs"
    );
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    assert!(readme.contains("(ARCHITECTURE.md)"), "the README links it");
}
