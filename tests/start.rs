//! Starting from where the user is: their uncommitted work, and their answers.

use crate::common::*;
use serde_json::json;
use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};

#[test]
fn uncommitted_changes_are_pointed_out_and_dirty_starts_from_them_untouched() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", TEST_CALC),
            (".gitignore", "*.log\n"),
            ("old.txt", "to be deleted\n"),
        ],
    );
    // The user fixed add() without committing, staged a deletion, and has new files.
    std::fs::write(repo.join("calc.py"), CALC_FIXED).unwrap();
    env.git(&repo, &["rm", "-q", "old.txt"]);
    std::fs::write(repo.join("notes.md"), "todo\n").unwrap();
    std::fs::write(repo.join("debug.log"), "ignored\n").unwrap();
    let before = UserState::capture(&env, &repo);

    let run = env.fix_scripted(
        &repo,
        "agent/clean",
        json!([end_turn("Done.")]),
        &["--max-turns", "1"],
    );
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert!(
        run.stderr().contains(
            "your uncommitted changes are not part of this run (2 changed tracked files, e.g. "
        ),
        "{}",
        run.stderr()
    );
    assert_eq!(
        env.show(&repo, "agent/clean:calc.py"),
        CALC,
        "the base is HEAD"
    );

    let run = env.fix_scripted(
        &repo,
        "agent/dirty",
        json!([end_turn("Done.")]),
        &["--dirty"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(!run.stderr().contains("uncommitted changes are not part"));
    assert_eq!(env.trailer(&repo, "agent/dirty", "Agent-Outcome"), "passed");
    let base = env.git(&repo, &["rev-parse", "agent/dirty~1"]);
    let files = env.git(&repo, &["ls-tree", "-r", "--name-only", base.trim()]);
    assert_eq!(files, ".gitignore\ncalc.py\nnotes.md\ntest_calc.py\n");
    assert_eq!(env.show(&repo, "agent/dirty:calc.py"), CALC_FIXED);
    let parent = env.git(&repo, &["rev-parse", "agent/dirty~2"]);
    assert_eq!(parent, env.git(&repo, &["rev-parse", "HEAD"]));
    assert_eq!(
        UserState::capture(&env, &repo),
        before,
        "the user's checkout is untouched"
    );

    let out = env.agent(
        &repo,
        &["fix", "--dirty", "--base", "HEAD~0", "--model", "script:x"],
    );
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("cannot be combined with --base"),
        "{}",
        stderr(&out)
    );
}

/// The user's uncommitted changes are said also where the run ends before the model is asked;
/// where it is asked, after the base's test (nothing before the first request waits for the
/// look, so it does not go on before).
#[test]
fn uncommitted_changes_are_said_whether_or_not_the_model_is_asked() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    std::fs::write(repo.join("calc.py"), CALC_FIXED).unwrap();
    let notice = "your uncommitted changes are not part of this run (1 changed tracked files";
    let unusable = env.fix_scripted(
        &repo,
        "agent/unusable",
        json!([end_turn("Done.")]),
        &["--test-cmd", "no-such-runner --all"],
    );
    assert_eq!(unusable.code(), 4, "{}", unusable.stderr());
    assert!(unusable.messages().is_empty(), "the model was asked");
    assert!(unusable.stderr().contains(notice), "{}", unusable.stderr());

    let asked = env.fix_scripted(&repo, "agent/asked", json!([end_turn("Done.")]), &[]);
    let stderr = asked.stderr();
    let said = stderr.find(notice).unwrap_or_else(|| panic!("{stderr}"));
    let tested = stderr
        .find("tests before any change")
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(tested < said, "{stderr}");
}

/// A checkout is judged clean from its stat data where that can tell: a same-size rewrite with
/// its modification time put back is still a change.
#[test]
fn a_same_size_rewrite_with_its_time_put_back_is_pointed_out() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let notice = "your uncommitted changes are not part of this run";
    let clean = env.fix_scripted(&repo, "agent/clean", json!([end_turn("Done.")]), &[]);
    assert!(!clean.stderr().contains(notice), "{}", clean.stderr());

    let calc = repo.join("calc.py");
    let was = std::fs::metadata(&calc).unwrap().modified().unwrap();
    assert_eq!(CALC.len(), CALC_FIXED.len());
    std::fs::write(&calc, CALC_FIXED).unwrap();
    let file = std::fs::File::options().write(true).open(&calc).unwrap();
    file.set_modified(was).unwrap();
    drop(file);
    let rewritten = env.fix_scripted(&repo, "agent/rewritten", json!([end_turn("Done.")]), &[]);
    assert!(
        rewritten
            .stderr()
            .contains(&format!("{notice} (1 changed tracked files, e.g. calc.py)")),
        "{}",
        rewritten.stderr()
    );
}

/// Puts every file of `repo`'s work tree ten seconds back and has git record that, so that no
/// entry is racily clean and the stat data alone judges the checkout.
fn settle(env: &TestEnv, repo: &std::path::Path) {
    let then = std::time::SystemTime::now() - std::time::Duration::from_secs(10);
    let mut folders = vec![repo.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if entry.file_name() == ".git" {
                continue;
            } else if kind.is_dir() {
                folders.push(entry.path());
            } else if kind.is_file() {
                let file = std::fs::File::options()
                    .write(true)
                    .open(entry.path())
                    .unwrap();
                file.set_modified(then).unwrap();
            }
        }
    }
    env.git(repo, &["update-index", "-q", "--refresh"]);
}

/// A link put where a tracked folder was is a change, though the files it leads to are the
/// very ones the index recorded.
#[test]
fn a_link_in_a_tracked_folders_place_is_pointed_out() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", TEST_CALC),
            ("lib/util.py", "def unit():\n    return 1\n"),
        ],
    );
    settle(&env, &repo);
    let notice = "your uncommitted changes are not part of this run";
    let clean = env.fix_scripted(&repo, "agent/clean", json!([end_turn("Done.")]), &[]);
    assert!(!clean.stderr().contains(notice), "{}", clean.stderr());

    std::fs::rename(repo.join("lib"), repo.join("lib-real")).unwrap();
    std::os::unix::fs::symlink("lib-real", repo.join("lib")).unwrap();
    let linked = env.fix_scripted(&repo, "agent/linked", json!([end_turn("Done.")]), &[]);
    assert!(
        linked.stderr().contains(&format!(
            "{notice} (1 changed tracked files, e.g. lib/util.py)"
        )),
        "{}",
        linked.stderr()
    );
}

/// An entry git smudged (stat data kept, size set to 0, as git does to a racily clean entry)
/// does not make an emptied file look committed.
#[test]
fn an_emptied_file_behind_a_smudged_entry_is_pointed_out() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    env.git(&repo, &["config", "core.trustctime", "false"]);
    settle(&env, &repo);
    let calc = repo.join("calc.py");
    let was = std::fs::metadata(&calc).unwrap().modified().unwrap();
    let file = std::fs::File::options().write(true).open(&calc).unwrap();
    file.set_len(0).unwrap();
    file.set_modified(was).unwrap();
    drop(file);
    // calc.py is the index's first entry: its size field is 36 bytes into it, after the
    // 12-byte header; the index ends with the SHA-1 of all that goes before.
    let smudge = "import hashlib, sys\n\
        p = sys.argv[1]\n\
        b = bytearray(open(p, 'rb').read()[:-20])\n\
        b[48:52] = bytes(4)\n\
        open(p, 'wb').write(bytes(b) + hashlib.sha1(b).digest())\n";
    let out = std::process::Command::new("python3")
        .args(["-c", smudge])
        .arg(repo.join(".git/index"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        env.git(&repo, &["ls-files", "--debug", "calc.py"])
            .lines()
            .find(|line| line.trim().starts_with("size:"))
            .map(|line| line.split_whitespace().nth(1).unwrap_or("").to_string()),
        Some("0".to_string()),
        "the entry is smudged"
    );

    let emptied = env.fix_scripted(&repo, "agent/emptied", json!([end_turn("Done.")]), &[]);
    assert!(
        emptied.stderr().contains(
            "your uncommitted changes are not part of this run (1 changed tracked files, e.g. calc.py)"
        ),
        "{}",
        emptied.stderr()
    );
}

/// Where the quick look cannot judge (here HEAD is unborn, on a new orphan branch), the full
/// status does: the files staged on it are not part of a run from another base.
#[test]
fn staged_files_on_an_unborn_branch_are_pointed_out() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    env.git(&repo, &["checkout", "-q", "--orphan", "fresh"]);
    let run = env.fix_scripted(
        &repo,
        "agent/orphan",
        json!([end_turn("Done.")]),
        &["--base", "main"],
    );
    assert!(
        run.stderr().contains(
            "your uncommitted changes are not part of this run (2 changed tracked files, e.g. calc.py)"
        ),
        "{}",
        run.stderr()
    );
}

fn ask(id: &str, question: &str) -> serde_json::Value {
    calls(
        "",
        vec![tool(id, "ask_user", json!({"question": question}))],
    )
}

#[test]
fn without_a_person_the_model_is_told_nobody_is_there() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let replies = json!([
        ask("q", "Should add() round?"),
        calls("Fix.", vec![fix_add()]),
        end_turn("Done.")
    ]);
    // Asked for, but stdin is no terminal: the model is told, and so is the user.
    let run = env.fix_scripted(&repo, "agent/alone", replies, &["--interactive"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(run
        .stderr()
        .contains("--interactive needs a terminal on stdin"));
    let (is_error, text) = &run.results()["q"];
    assert!(
        !is_error && text.starts_with("Nobody is available to answer"),
        "{text}"
    );
    assert!(env
        .message(&repo, "agent/alone")
        .contains("ask \"Should add() round?\" -> nobody available"));
}

/// A pseudo-terminal: (the side a person types into, the side a program reads as its tty).
fn pty() -> (std::fs::File, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two descriptors it opened into the pointers given; the rest null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened by openpty and are owned by nobody else.
    unsafe {
        (
            std::fs::File::from_raw_fd(master),
            OwnedFd::from_raw_fd(slave),
        )
    }
}

#[test]
fn at_a_terminal_the_person_answers_and_the_report_keeps_it() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let replies = json!([
        ask("q", "Should add() round?"),
        calls("Fix.", vec![fix_add()]),
        end_turn("Done.")
    ]);
    let script = env.script("ask.json", replies);
    let transcript = env.path().join("t.json");
    let (mut person, tty) = pty();
    // Typed ahead: the terminal keeps the line until the question reads it.
    person.write_all(b"No, keep integers\n").unwrap();
    let mut cmd = env.fix_cmd(
        &repo,
        &script,
        "agent/asked",
        &[
            "--interactive",
            "--transcript",
            transcript.to_str().unwrap(),
        ],
    );
    let out = cmd.stdin(std::process::Stdio::from(tty)).output().unwrap();
    drop(person);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("agent-git: the model asks: Should add() round?"),
        "{}",
        stderr(&out)
    );
    let messages = read_transcript(&transcript)["messages"].clone();
    assert_eq!(
        messages[2]["content"][0]["content"],
        "The person answered: No, keep integers"
    );
    assert!(env
        .message(&repo, "agent/asked")
        .contains("ask \"Should add() round?\" -> answered: No, keep integers"));
}

fn hook(env: &TestEnv, repo: &std::path::Path, name: &str, script: &str) {
    let path = repo.join(".git/hooks").join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, script).unwrap();
    let _ = env;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn write(id: &str, content: &str) -> serde_json::Value {
    tool(
        id,
        "write_file",
        json!({"path": "calc.py", "content": content}),
    )
}

#[test]
fn the_repositorys_commit_hooks_see_agent_commits() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    // A secret scanner, a formatter that spaces out `a+b`, and a sign-off on every message.
    hook(
        &env,
        &repo,
        "pre-commit",
        "#!/bin/sh\nif git diff --cached | grep -q 'API_KEY ='; then\n  \
         echo 'secret scanner: an API key is staged'\n  exit 1\nfi\n\
         sed -i 's/a+b/a + b/' calc.py\n",
    );
    hook(
        &env,
        &repo,
        "commit-msg",
        "#!/bin/sh\nprintf '\\nReviewed-by: hook\\n' >> \"$1\"\n",
    );
    let leaky = format!("API_KEY = 'sk-123'\n\n\n{}", CALC.replace("a - b", "a+b"));
    let replies = json!([
        calls("Fix add.", vec![write("leak", &leaky)]),
        calls(
            "Fix add, without the key.",
            vec![write("fix", &CALC.replace("a - b", "a+b"))]
        ),
        end_turn("Done.")
    ]);
    let before = UserState::capture(&env, &repo);
    let run = env.fix_scripted(&repo, "agent/hooked", replies.clone(), &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    run.assert_refused("leak", "secret scanner: an API key is staged");
    assert!(run.results()["leak"]
        .1
        .contains("refused by the repository's pre-commit hook"));
    // The formatter's change is what was committed, and the message carries the sign-off.
    assert_eq!(env.show(&repo, "agent/hooked:calc.py"), CALC_FIXED);
    let log = env.git(&repo, &["log", "--format=%B", "main..agent/hooked"]);
    assert!(!log.contains("API_KEY"), "{log}");
    assert!(log.contains("Reviewed-by: hook"), "{log}");
    let report = env.message(&repo, "agent/hooked");
    assert!(
        report.contains("commit hooks: pre-commit and commit-msg ran on each agent commit"),
        "{report}"
    );
    assert!(report.contains("-> refused: pre-commit hook"), "{report}");
    assert_eq!(UserState::capture(&env, &repo), before);

    let run = env.fix_scripted(&repo, "agent/unhooked", replies, &["--no-verify"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let diff = env.git(&repo, &["log", "-p", "main..agent/unhooked"]);
    assert!(
        diff.contains("+API_KEY"),
        "without hooks the key was committed: {diff}"
    );
    assert!(env
        .message(&repo, "agent/unhooked")
        .contains("commit hooks skipped (--no-verify): pre-commit and commit-msg"));
}

/// What python3 has (pytest, its modules) is remembered from an earlier run and used at once,
/// while python3 is asked again beside the run: where its answer differs from what was
/// remembered, the answer decides the plan and the base is tested again with it.
#[test]
fn remembered_python_facts_give_way_to_what_python3_answers() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let fix = || json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]);
    let first = env.fix_scripted(&repo, "agent/first", fix(), &["--json"]);
    assert_eq!(first.code(), 0, "{}", first.stderr());
    let report =
        |run: &Run| -> serde_json::Value { serde_json::from_str(stdout(&run.out).trim()).unwrap() };
    let command = report(&first)["tests"]["command"].clone();

    let cache = env.path().join("home/.cache/agent-git");
    let files: Vec<std::path::PathBuf> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let answer = std::fs::read_to_string(&files[0]).unwrap();
    let mut remembered: serde_json::Value = serde_json::from_str(&answer).unwrap();
    // Remembered wrong: pytest there when it is not, or gone when it is there.
    let had_pytest = remembered["pytest"].as_bool().unwrap();
    remembered["pytest"] = json!(!had_pytest);
    std::fs::write(&files[0], remembered.to_string()).unwrap();

    let second = env.fix_scripted(&repo, "agent/second", fix(), &["--json"]);
    assert_eq!(second.code(), 0, "{}", second.stderr());
    assert!(
        second.stderr().contains("python3 answered otherwise"),
        "{}",
        second.stderr()
    );
    let v = report(&second);
    assert_eq!(v["outcome"], "passed", "{v}");
    assert_eq!(v["tests"]["command"], command, "{v}");
    // The answer is what is remembered now.
    let now: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    assert_eq!(now["pytest"], json!(had_pytest));

    // Remembered right, the plan is made at once, and nothing is said.
    let third = env.fix_scripted(&repo, "agent/third", fix(), &["--json"]);
    assert_eq!(third.code(), 0, "{}", third.stderr());
    assert!(!third.stderr().contains("answered otherwise"));
    assert_eq!(report(&third)["tests"]["command"], command);
}

/// python3 is asked again with the stamp of the remembered answer (its version, and the stat
/// data of where it imports from): where nothing moved, it says so and the facts stand, the
/// file untouched; a package installed since moves its folder, and its answer is asked whole.
#[test]
fn remembered_python_facts_stand_until_where_python3_imports_from_moves() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let venv = env.path().join("venv");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let path = format!(
        "{}:{}",
        venv.join("bin").display(),
        std::env::var("PATH").unwrap()
    );
    let fix = |branch: &str| {
        let run = env.fix_scripted_with(
            &repo,
            branch,
            json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]),
            &["--json"],
            |cmd| {
                cmd.env("PATH", &path);
            },
        );
        assert_eq!(run.code(), 0, "{}", run.stderr());
        run
    };
    let kept = || -> (serde_json::Value, u64) {
        let cache = env.path().join("home/.cache/agent-git");
        let files: Vec<std::path::PathBuf> = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        let text = std::fs::read_to_string(&files[0]).unwrap();
        let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&files[0]).unwrap());
        (serde_json::from_str(&text).unwrap(), inode)
    };
    let has_module = |facts: &serde_json::Value, name: &str| {
        facts["modules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == name)
    };

    fix("agent/first");
    let (first, first_file) = kept();
    assert!(
        first["stamp"].as_str().is_some_and(|s| !s.is_empty()),
        "{first}"
    );
    assert!(!has_module(&first, "freshly_installed"), "{first}");

    // Nothing moved: python3 says so, and the remembered file is not written again.
    let second = fix("agent/second");
    assert!(
        !second.stderr().contains("answered otherwise"),
        "{}",
        second.stderr()
    );
    let (again, again_file) = kept();
    assert_eq!((&again, again_file), (&first, first_file));

    // A package installed into the venv, as pip leaves one: its folder and its metadata.
    let site = site_packages(&venv);
    std::fs::create_dir(site.join("freshly_installed")).unwrap();
    std::fs::write(site.join("freshly_installed/__init__.py"), "").unwrap();
    let dist = site.join("freshly_installed-1.0.dist-info");
    std::fs::create_dir(&dist).unwrap();
    std::fs::write(
        dist.join("METADATA"),
        "Metadata-Version: 2.1\nName: freshly-installed\nVersion: 1.0\n",
    )
    .unwrap();
    std::fs::write(dist.join("top_level.txt"), "freshly_installed\n").unwrap();
    std::fs::write(dist.join("RECORD"), "freshly_installed/__init__.py,,\n").unwrap();

    // The plan is the same (the built-in runner); what python3 imports is not.
    fix("agent/third");
    let (now, _) = kept();
    assert!(has_module(&now, "freshly_installed"), "{now}");
    assert!(
        now["distributions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d == "freshly_installed"),
        "{now}"
    );
    assert_ne!(now["stamp"], first["stamp"]);
}

#[test]
fn a_missing_key_is_said_before_the_clean_room_is_touched() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let tmp = tempfile::tempdir().unwrap();
    for model in ["anthropic:claude-sonnet-4-5", "openai:gpt-5"] {
        let out = env
            .agent_cmd(&repo, &["fix", "--model", model])
            .env("TMPDIR", tmp.path())
            .output()
            .unwrap();
        assert_eq!(code(&out), 2, "{}", stderr(&out));
        assert!(
            stderr(&out).contains("_API_KEY is not set"),
            "{}",
            stderr(&out)
        );
        // The run had not started a clean room's checkout, which an error waits for.
        let rooms: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("agent-git-room"))
            .collect();
        assert!(rooms.is_empty(), "{model}: {rooms:?}");
    }
    assert!(!env.git(&repo, &["branch"]).contains("agent/"));
}
