//! A test environment that isolates the real binary and real git from the machine: its own
//! HOME, no global or system git config, fixed identities and dates, no inherited variables.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const CALC: &str =
    "def add(a, b):\n    return a - b\n\n\ndef multiply(a, b):\n    return a * b\n";
pub const CALC_FIXED: &str =
    "def add(a, b):\n    return a + b\n\n\ndef multiply(a, b):\n    return a * b\n";
pub const TEST_CALC: &str = "from calc import add, multiply\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_multiply():\n    assert multiply(4, 5) == 20\n";

/// The same tests for unittest, which needs no pytest.
pub const UNITTEST_CALC: &str = concat!(
    "import unittest\n",
    "from calc import add, multiply\n",
    "\n\n",
    "class T(unittest.TestCase):\n",
    "    def test_add(self):\n",
    "        self.assertEqual(add(2, 3), 5)\n",
    "\n",
    "    def test_multiply(self):\n",
    "        self.assertEqual(multiply(4, 5), 20)\n",
);

pub struct TestEnv {
    root: tempfile::TempDir,
}

impl TestEnv {
    pub fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("home")).unwrap();
        TestEnv { root }
    }

    pub fn path(&self) -> &Path {
        self.root.path()
    }

    fn isolate(&self, cmd: &mut Command) {
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.path().join("home"))
            .env("XDG_CONFIG_HOME", self.path().join("home/.config"))
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_SYSTEM", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Test User")
            .env("GIT_AUTHOR_EMAIL", "user@example.com")
            .env("GIT_COMMITTER_NAME", "Test User")
            .env("GIT_COMMITTER_EMAIL", "user@example.com")
            .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
            .env("LANG", "C.UTF-8")
            .env("NPM_CONFIG_UPDATE_NOTIFIER", "false");
    }

    /// Runs real git in `dir`; panics on failure and returns stdout.
    pub fn git(&self, dir: &Path, args: &[&str]) -> String {
        let mut cmd = Command::new("git");
        self.isolate(&mut cmd);
        let out = cmd.args(args).current_dir(dir).output().unwrap();
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// A repository with `files`, committed once on `main`.
    pub fn repo(&self, name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = self.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        self.git(&dir, &["init", "-q", "-b", "main"]);
        self.git(&dir, &["config", "user.name", "Test User"]);
        self.git(&dir, &["config", "user.email", "user@example.com"]);
        for (path, text) in files {
            let full = dir.join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, text).unwrap();
        }
        self.git(&dir, &["add", "-A"]);
        self.git(&dir, &["commit", "-q", "-m", "initial"]);
        dir
    }

    /// The calculator whose add() subtracts: test_add fails, test_multiply passes.
    pub fn calc_repo(&self) -> PathBuf {
        self.repo("calc", &[("calc.py", CALC), ("test_calc.py", TEST_CALC)])
    }

    pub fn script(&self, name: &str, replies: Value) -> PathBuf {
        let path = self.path().join(name);
        std::fs::write(&path, serde_json::to_string_pretty(&replies).unwrap()).unwrap();
        path
    }

    /// Runs the real agent-git binary in `dir`.
    pub fn agent(&self, dir: &Path, args: &[&str]) -> Output {
        self.agent_cmd(dir, args).output().unwrap()
    }

    pub fn agent_cmd(&self, dir: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agent-git"));
        self.isolate(&mut cmd);
        cmd.args(args).current_dir(dir);
        cmd
    }

    /// `bash -c SCRIPT` in `dir`, isolated as agent-git is, with the agent-git under test first
    /// on PATH, as an installed one would be.
    pub fn bash(&self, dir: &Path, script: &str) -> Output {
        let mut cmd = Command::new("bash");
        self.isolate(&mut cmd);
        let bin = Path::new(env!("CARGO_BIN_EXE_agent-git")).parent().unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.env("PATH", path).arg("-c").arg(script).current_dir(dir);
        cmd.output().unwrap()
    }

    /// `agent-git fix "Fix the adder" --model script:SCRIPT --branch BRANCH [extra]`.
    pub fn fix(&self, dir: &Path, script: &Path, branch: &str, extra: &[&str]) -> Output {
        self.fix_cmd(dir, script, branch, extra).output().unwrap()
    }

    pub fn fix_cmd(&self, dir: &Path, script: &Path, branch: &str, extra: &[&str]) -> Command {
        let model = format!("script:{}", script.display());
        let mut args = vec![
            "fix",
            "Fix the adder",
            "--model",
            &model,
            "--branch",
            branch,
        ];
        args.extend_from_slice(extra);
        self.agent_cmd(dir, &args)
    }

    /// How many work trees `git worktree list` shows in `dir`'s repository, leaving out the
    /// ones agent-git keeps for its next runs (`.git/agent-git/pool-N`, holding no branch).
    pub fn worktrees_but_the_pool(&self, dir: &Path) -> usize {
        let list = self.git(dir, &["worktree", "list"]);
        list.lines()
            .filter(|l| !l.contains("/agent-git/pool-"))
            .count()
    }

    /// The full message of a commit.
    pub fn message(&self, dir: &Path, rev: &str) -> String {
        self.git(dir, &["log", "-1", "--format=%B", rev])
    }

    /// A trailer of a commit, as git itself parses it.
    pub fn trailer(&self, dir: &Path, rev: &str, key: &str) -> String {
        let format = format!("--format=%(trailers:key={key},valueonly)");
        self.git(dir, &["log", "-1", &format, rev])
            .trim()
            .to_string()
    }

    pub fn show(&self, dir: &Path, rev_path: &str) -> String {
        self.git(dir, &["show", rev_path])
    }

    /// The `Agent-Tool` trailers of the commits on `branch` since `main`, oldest first: which
    /// tool call made each edit.
    pub fn tool_trailers(&self, dir: &Path, branch: &str) -> Vec<String> {
        let range = format!("main..{branch}");
        let format = "--format=%(trailers:key=Agent-Tool,valueonly)";
        self.git(dir, &["log", "--reverse", format, &range])
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// Subjects of the commits on `branch` since `main`, oldest first.
    pub fn subjects(&self, dir: &Path, branch: &str) -> Vec<String> {
        let range = format!("main..{branch}");
        self.git(dir, &["log", "--reverse", "--format=%s", &range])
            .lines()
            .map(str::to_string)
            .collect()
    }
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

pub fn tool(id: &str, name: &str, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

/// A reply that calls tools, with a line of text (the commit body of any edit).
pub fn calls(text: &str, tools: Vec<Value>) -> Value {
    let mut content = vec![json!({"type": "text", "text": text})];
    content.extend(tools);
    json!({"stop_reason": "tool_use", "content": content})
}

pub fn end_turn(text: &str) -> Value {
    json!({"stop_reason": "end_turn", "content": [{"type": "text", "text": text}]})
}

pub fn fix_add() -> Value {
    tool(
        "fix",
        "edit_file",
        json!({"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}),
    )
}

/// Everything about a user's repository that a run must leave alone: HEAD, the index file,
/// every ref but agent-git's own (its branches, transcripts and notes of what it tested), the
/// stash, and every file of the working tree.
#[derive(Debug, PartialEq, Eq)]
pub struct UserState {
    head: String,
    symbolic_head: String,
    index: Vec<u8>,
    refs: String,
    stash: String,
    files: BTreeMap<PathBuf, Vec<u8>>,
    hooks: BTreeMap<PathBuf, Vec<u8>>,
}

impl UserState {
    pub fn capture(env: &TestEnv, dir: &Path) -> Self {
        let refs = env
            .git(dir, &["for-each-ref", "--format=%(refname) %(objectname)"])
            .lines()
            // agent-git's own: its runs' branches, their transcripts and what it tested.
            .filter(|l| {
                !l.starts_with("refs/heads/agent/")
                    && !l.starts_with("refs/notes/agent-git")
                    && !l.starts_with("refs/agent-git/sets/")
            })
            .collect::<Vec<_>>()
            .join("\n");
        UserState {
            head: env.git(dir, &["rev-parse", "HEAD"]),
            symbolic_head: env.git(dir, &["symbolic-ref", "HEAD"]),
            index: std::fs::read(dir.join(".git/index")).unwrap_or_default(),
            refs,
            stash: env.git(dir, &["stash", "list"]),
            files: read_tree(dir, dir, true),
            hooks: read_tree(&dir.join(".git/hooks"), &dir.join(".git/hooks"), false),
        }
    }
}

fn read_tree(root: &Path, dir: &Path, skip_git: bool) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries {
        let entry = entry.unwrap();
        let path = entry.path();
        if skip_git && entry.file_name() == ".git" {
            continue;
        }
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            files.extend(read_tree(root, &path, skip_git));
        } else {
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            files.insert(rel, std::fs::read(&path).unwrap_or_default());
        }
    }
    files
}

/// A finished run of the real binary, with the transcript it wrote.
pub struct Run {
    pub out: Output,
    pub transcript: Value,
}

impl Run {
    pub fn code(&self) -> i32 {
        code(&self.out)
    }

    pub fn stderr(&self) -> String {
        stderr(&self.out)
    }

    pub fn messages(&self) -> &Vec<Value> {
        self.transcript["messages"].as_array().unwrap()
    }

    /// Asserts that the tool call `id` came back as an error that says `says`.
    pub fn assert_refused(&self, id: &str, says: &str) {
        let results = self.results();
        let (is_error, text) = &results[id];
        assert!(*is_error && text.contains(says), "{id}: {text}");
    }

    /// Every tool result of the conversation by tool_use id: (is_error, content).
    pub fn results(&self) -> std::collections::HashMap<String, (bool, String)> {
        let mut out = std::collections::HashMap::new();
        for message in self.messages() {
            for block in message["content"].as_array().unwrap() {
                if block["type"] == "tool_result" {
                    let id = block["tool_use_id"].as_str().unwrap().to_string();
                    let text = block["content"].as_str().unwrap().to_string();
                    out.insert(id, (block["is_error"] == true, text));
                }
            }
        }
        out
    }
}

pub fn read_transcript(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

impl TestEnv {
    /// `agent-git fix "Fix the adder"` with `replies` as its scripted model, on `branch`,
    /// with a transcript to read back.
    pub fn fix_scripted(&self, repo: &Path, branch: &str, replies: Value, extra: &[&str]) -> Run {
        self.fix_scripted_with(repo, branch, replies, extra, |_| {})
    }

    /// The same, with a hook to adjust the command (its environment, say).
    pub fn fix_scripted_with(
        &self,
        repo: &Path,
        branch: &str,
        replies: Value,
        extra: &[&str],
        adjust: impl FnOnce(&mut Command),
    ) -> Run {
        let name = branch.replace('/', "-");
        let script = self.script(&format!("{name}.json"), replies);
        let transcript = self.path().join(format!("{name}.transcript.json"));
        let transcript_arg = transcript.display().to_string();
        let mut args = vec!["--transcript", &transcript_arg];
        args.extend_from_slice(extra);
        let mut cmd = self.fix_cmd(repo, &script, branch, &args);
        adjust(&mut cmd);
        let out = cmd.output().unwrap();
        let transcript = std::fs::read_to_string(&transcript)
            .map(|t| serde_json::from_str(&t).unwrap())
            .unwrap_or(Value::Null);
        Run { out, transcript }
    }
}

/// A PATH whose `python3` has pytest: the venv of the README's set-up (`target/test-venv`,
/// which `.ci/run` makes), or the one `AGENT_GIT_TEST_VENV` names. Tests of pytest's ways
/// need the real pytest, as users have it: in a venv.
pub fn pytest_path() -> String {
    let venv = std::env::var("AGENT_GIT_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-venv"));
    let bin = venv.join("bin");
    assert!(
        bin.join("python3").exists() && bin.join("pytest").exists(),
        "this test needs pytest in a venv at {}: run `python3 -m venv target/test-venv && \
         target/test-venv/bin/pip install pytest` (the README's set-up; .ci/run does it)",
        venv.display()
    );
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The test run anyone can do: `git archive` of `rev` into a fresh directory, `command` run
/// there with a fresh HOME and nothing inherited but PATH. Returns (passed, output).
pub fn export_and_test(
    env: &TestEnv,
    repo: &Path,
    rev: &str,
    command: &str,
    path: &str,
) -> (bool, String) {
    let name = format!("export-{}", rev.replace('/', "-"));
    let dir = env.path().join(&name);
    let home = env.path().join(format!("{name}-home"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let archive = env.path().join(format!("{name}.tar"));
    env.git(
        repo,
        &[
            "archive",
            "--format=tar",
            "-o",
            archive.to_str().unwrap(),
            rev,
        ],
    );
    let untar = Command::new("tar")
        .args([
            "-xf",
            archive.to_str().unwrap(),
            "-C",
            dir.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(untar.success());
    let out = Command::new("sh")
        .args(["-c", command])
        .current_dir(&dir)
        .env_clear()
        .env("PATH", path)
        .env("HOME", &home)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let text = format!("{}{}", stdout(&out), stderr(&out));
    (out.status.success(), text)
}

/// A file's bytes, or None when it is not there.
pub fn snapshot_dir(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    read_tree(dir, dir, false)
}

/// Ctrl-C, as a terminal sends it, to a process this test started.
pub fn interrupt(child: &std::process::Child) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
}

/// A PATH whose python3 runs in isolated mode (-I -S: no site-packages, so no pytest), which
/// makes agent-git choose its built-in runner on any machine. Isolated mode also ignores
/// PYTHONDONTWRITEBYTECODE, so a test run leaves __pycache__ behind, which must not block the
/// next commit.
pub fn python_without_pytest(env: &TestEnv) -> String {
    let bin = env.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let python = bin.join("python3");
    let real = which("python3");
    std::fs::write(
        &python,
        format!("#!/bin/sh\nexec {} -I -S \"$@\"\n", real.display()),
    )
    .unwrap();
    let mut perms = std::fs::metadata(&python).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&python, perms).unwrap();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
}

/// The site-packages folder of the venv at `venv`.
pub fn site_packages(venv: &Path) -> PathBuf {
    std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("site-packages")
}

pub fn which(program: &str) -> std::path::PathBuf {
    std::env::var("PATH")
        .unwrap()
        .split(':')
        .map(|dir| std::path::Path::new(dir).join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
}
