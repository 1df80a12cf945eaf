//! The built-in eval suite (`evals/`): every task is checked as it ships. Its oracle is run
//! with `--if-failing`, so one run says both things that make a task valid: the tests fail on
//! the repository as committed (else the outcome would be `already-passing`), and the oracle's
//! edits make them pass; an impossible task's honest oracle ends not passed, with the tests
//! that still fail (or vanished) named in the report.

use crate::common::{code, stderr, stdout, TestEnv};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Tasks checked at once: each run is mostly waiting on a test process, and the machine is
/// small.
const WORKERS: usize = 3;

fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("evals")
}

/// Every task of the suite: the directories of `evals/`, by name.
fn tasks() -> Vec<PathBuf> {
    let mut tasks: Vec<PathBuf> = std::fs::read_dir(suite_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .collect();
    tasks.sort();
    tasks
}

/// Every file under `dir`, as (path relative to `root`, text).
fn files(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(root, &path, out);
        } else {
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            out.push((rel, std::fs::read_to_string(&path).unwrap()));
        }
    }
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The `fix` arguments a task's `task.json` asks for.
fn task_args(spec: &Value, oracle: &Path) -> Result<Vec<String>, String> {
    let prompt = spec["prompt"].as_str().ok_or("task.json has no prompt")?;
    let mut args: Vec<String> = vec![
        "fix".into(),
        prompt.into(),
        "--model".into(),
        format!("script:{}", oracle.display()),
        "--branch".into(),
        "agent/eval".into(),
        "--if-failing".into(),
        "--json".into(),
    ];
    for (key, flag) in [("test_cmd", "--test-cmd"), ("setup_cmd", "--setup-cmd")] {
        if let Some(value) = spec[key].as_str() {
            args.extend([flag.into(), value.into()]);
        }
    }
    if let Some(turns) = spec["max_turns"].as_u64() {
        args.extend(["--max-turns".into(), turns.to_string()]);
    }
    for glob in spec["protect"].as_array().into_iter().flatten() {
        let glob = glob.as_str().ok_or("protect holds a non-string")?;
        args.extend(["--protect".into(), glob.into()]);
    }
    Ok(args)
}

/// Checks one task; the error says what is wrong with it.
fn check(task: &Path) -> Result<(), String> {
    let spec = read_json(&task.join("task.json"))?;
    let oracle = task.join("oracle.json");
    read_json(&oracle)?;
    let impossible = spec["impossible"] == true;
    let env = TestEnv::new();
    let mut contents = Vec::new();
    files(&task.join("repo"), &task.join("repo"), &mut contents);
    let borrowed: Vec<(&str, &str)> = contents
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let repo = env.repo("repo", &borrowed);
    let args = task_args(&spec, &oracle)?;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = env.agent_cmd(&repo, &args);
    if repo.join("Cargo.toml").exists() {
        // rustup's toolchains live in the real HOME.
        cmd.env("HOME", std::env::var("HOME").unwrap_or_default());
    }
    let out = cmd.output().unwrap();
    let json: Value = serde_json::from_str(&stdout(&out)).map_err(|e| {
        format!(
            "no --json object ({e}), exit {}: {}",
            code(&out),
            stderr(&out)
        )
    })?;
    let outcome = json["outcome"].as_str().unwrap_or_default();
    if outcome == "already-passing" {
        return Err("its tests pass before any change".into());
    }
    if !impossible {
        if code(&out) != 0 || outcome != "passed" {
            return Err(format!(
                "the oracle ends {outcome} (exit {}): {}",
                code(&out),
                stderr(&out)
            ));
        }
        return Ok(());
    }
    if code(&out) != 1 || outcome == "passed" {
        return Err(format!(
            "an impossible task ends {outcome} (exit {}), not failed: {}",
            code(&out),
            stderr(&out)
        ));
    }
    let named: Vec<&str> = ["failing", "vanished"]
        .iter()
        .flat_map(|key| json["tests"][key].as_array().into_iter().flatten())
        .filter_map(|test| test.as_str().or_else(|| test["name"].as_str()))
        .collect();
    let report = env.message(&repo, "agent/eval");
    if named.is_empty() || !named.iter().all(|name| report.contains(name)) {
        return Err(format!(
            "the report should name the failing or vanished tests {named:?}:\n{report}"
        ));
    }
    if !report.contains("-> refused") {
        return Err(format!(
            "an impossible task's oracle tries to change a test and is refused:\n{report}"
        ));
    }
    Ok(())
}

#[test]
fn every_task_fails_as_committed_and_its_oracle_ends_as_the_task_says() {
    let tasks = tasks();
    assert!(tasks.len() >= 20, "the suite has {} tasks", tasks.len());
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..WORKERS {
            scope.spawn(|| {
                while let Some(task) = tasks.get(next.fetch_add(1, Ordering::SeqCst)) {
                    if let Err(why) = check(task) {
                        let name = task.file_name().unwrap().to_string_lossy().into_owned();
                        failures.lock().unwrap().push(format!("{name}: {why}"));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_task_is_complete_and_listed_in_the_readme() {
    let readme = std::fs::read_to_string(suite_dir().join("README.md")).unwrap();
    for task in tasks() {
        let name = task.file_name().unwrap().to_string_lossy().into_owned();
        let spec = read_json(&task.join("task.json")).unwrap();
        assert!(spec["prompt"].is_string(), "{name}: a prompt");
        assert!(
            spec["tags"].as_array().is_some_and(|t| !t.is_empty()),
            "{name}: tags say its language and kind of bug"
        );
        let oracle = read_json(&task.join("oracle.json")).unwrap();
        assert!(
            oracle.as_array().is_some_and(|r| !r.is_empty()),
            "{name}: an oracle"
        );
        assert!(task.join("repo").is_dir(), "{name}: a repo/");
        assert!(
            readme.contains(&format!("`{name}`")),
            "{name}: listed in evals/README.md"
        );
    }
}
