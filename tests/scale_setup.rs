//! Run set-up that costs little however large the repository: a run hands its work tree to the
//! next one (which sees exactly its base, nothing an earlier run left), two runs at once never
//! share one, gc empties the pool, and `--if-failing` on a passing repository answers without
//! a branch or a work tree, from the record of passes when it can; the clean room's whole
//! checkout is done by a process of its own.

use crate::common::*;
use serde_json::{json, Value};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const CHECK: &str = "python3 -c 'import calc; assert calc.add(2, 3) == 5'";

fn run(id: &str, command: &str) -> Value {
    tool(id, "run_command", json!({"command": command}))
}

/// The calculator with a package and ignore rules for what builds leave.
fn repo(env: &TestEnv) -> PathBuf {
    env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", TEST_CALC),
            (".gitignore", "build/\n.venv/\n*.pyc\n"),
            ("src/pkg/mod.py", "VALUE = 1\n"),
            ("docs/notes.md", "notes\n"),
        ],
    )
}

/// The work tree a run said it worked in.
fn work_tree(stderr: &str) -> PathBuf {
    let at = stderr.find("(work tree ").expect("a work tree line") + "(work tree ".len();
    let rest = &stderr[at..];
    PathBuf::from(&rest[..rest.find(")\n").unwrap()])
}

/// The work trees git knows besides the user's checkout.
fn linked_trees(env: &TestEnv, repo: &Path) -> Vec<String> {
    let list = env.git(repo, &["worktree", "list", "--porcelain"]);
    let trees: Vec<String> = list
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .map(String::from)
        .collect();
    trees[1..].to_vec()
}

/// Everything an earlier run could leave in its work tree: ignored builds and a venv, a link
/// out, a folder nobody may read, a nested repository, a planted `.git` in a tracked folder,
/// the tree's own `.git` pointing elsewhere, a tracked file changed behind git's back (same
/// size, same modification time), one made executable, one changed and staged (the index
/// and the tree agree, the commit does not) and one taken out of the index but left in place.
fn plant_leftovers(env: &TestEnv, tree: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for dir in [
        "build/locked",
        ".venv/bin",
        "src/pkg/__pycache__",
        "nested/.git",
        "src/.git",
    ] {
        std::fs::create_dir_all(tree.join(dir)).unwrap();
    }
    std::fs::write(tree.join("build/out.o"), "object").unwrap();
    std::fs::write(tree.join(".venv/bin/python"), "#!/bin/sh\n").unwrap();
    std::fs::write(tree.join("src/pkg/__pycache__/mod.pyc"), "cache").unwrap();
    std::fs::write(tree.join("nested/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(tree.join("src/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(tree.join("stray.txt"), "from another run").unwrap();
    std::os::unix::fs::symlink("/etc", tree.join("src/pkg/out")).unwrap();
    std::fs::set_permissions(tree.join("build/locked"), PermissionsExt::from_mode(0o000)).unwrap();
    let module = tree.join("src/pkg/mod.py");
    let mtime = std::fs::metadata(&module).unwrap().modified().unwrap();
    std::fs::write(&module, "VALUE = 2\n").unwrap();
    let file = std::fs::File::options().write(true).open(&module).unwrap();
    file.set_modified(mtime).unwrap();
    let ignore = tree.join(".gitignore");
    std::fs::set_permissions(&ignore, PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(tree.join("docs/notes.md"), "staged notes\n").unwrap();
    env.git(tree, &["add", "docs/notes.md"]);
    env.git(tree, &["rm", "-q", "--cached", "calc.py"]);
    std::fs::remove_file(tree.join(".git")).unwrap();
    std::fs::write(tree.join(".git"), "gitdir: /nonexistent\n").unwrap();
}

const LIST: &str = "find . -path ./.git -prune -o -print | LC_ALL=C sort; \
    stat -c '%a %n' .gitignore src/pkg/mod.py; cat src/pkg/mod.py docs/notes.md";

#[test]
fn the_next_run_takes_the_pooled_tree_and_sees_exactly_its_base() {
    let env = TestEnv::new();
    let repo = repo(&env);
    let base = env.git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let before = UserState::capture(&env, &repo);
    let first = env.fix_scripted(
        &repo,
        "agent/one",
        json!([
            calls(
                "Build things.",
                vec![run(
                    "build",
                    "mkdir -p build && echo o > build/a.o && echo n > notes.txt"
                )]
            ),
            end_turn("Done."),
        ]),
        &["--test-cmd", CHECK],
    );
    let tree = work_tree(&first.stderr());
    assert!(tree.ends_with("agent-git/pool-1"), "{}", first.stderr());
    assert!(tree.exists(), "the tree stays for the next run");
    let index = std::fs::read(repo.join(".git/worktrees/agent-git-pool-1/index")).unwrap();
    assert_eq!(
        &index[..8],
        b"DIRC\0\0\0\x04",
        "the work tree's index is in the compact format"
    );
    assert!(
        !env.git(&tree, &["status", "--porcelain=v2", "--branch"])
            .contains("branch.head agent/one"),
        "a pooled tree holds no branch"
    );
    plant_leftovers(&env, &tree);
    // A file no run changed keeps its old time in a reused tree; a fresh checkout writes it now.
    let untouched = tree.join("test_calc.py");
    let old = made_old(&untouched);

    let second = env.fix_scripted(
        &repo,
        "agent/two",
        json!([
            calls("Look first.", vec![run("list", LIST), fix_add()]),
            end_turn("Fixed.")
        ]),
        &["--test-cmd", CHECK],
    );
    assert_eq!(second.code(), 0, "{}", second.stderr());
    assert_eq!(
        work_tree(&second.stderr()),
        tree,
        "the same tree, taken from the pool"
    );
    let kept = std::fs::metadata(&untouched).unwrap().modified().unwrap();
    assert_eq!(kept, old, "only the paths that differ were written");
    let (_, listing) = &second.results()["list"];
    let expected = ".\n./.gitignore\n./calc.py\n./docs\n./docs/notes.md\n./src\n./src/pkg\n\
                    ./src/pkg/mod.py\n./test_calc.py\n644 .gitignore\n644 src/pkg/mod.py\n\
                    VALUE = 1\nnotes\n";
    assert!(
        listing.contains(expected),
        "the model saw leftovers: {listing}"
    );
    let changed = env.git(&repo, &["diff", "--name-only", &base, "agent/two"]);
    assert_eq!(
        changed, "calc.py\n",
        "nothing of the first run reached the second branch"
    );
    assert_eq!(env.git(&repo, &["rev-parse", "agent/two~2"]).trim(), base);
    assert_eq!(linked_trees(&env, &repo), vec![tree.display().to_string()]);
    assert_eq!(UserState::capture(&env, &repo), before);

    // A file changed behind an index entry marked assume-unchanged, which status passes over.
    env.git(
        &tree,
        &["update-index", "--assume-unchanged", "docs/notes.md"],
    );
    std::fs::write(tree.join("docs/notes.md"), "changed behind the index\n").unwrap();
    let third = env.fix_scripted(
        &repo,
        "agent/three",
        json!([
            calls("Look.", vec![run("notes", "cat docs/notes.md")]),
            end_turn("Nothing to do.")
        ]),
        &["--test-cmd", CHECK],
    );
    assert_eq!(work_tree(&third.stderr()), tree, "{}", third.stderr());
    let (_, notes) = &third.results()["notes"];
    assert!(
        notes.contains("notes\n") && !notes.contains("behind"),
        "the model saw a leftover behind the index: {notes}"
    );
}

#[test]
fn two_runs_at_once_never_share_a_tree_and_gc_empties_the_pool() {
    let env = TestEnv::new();
    let repo = repo(&env);
    let before = UserState::capture(&env, &repo);
    let start = |name: &str| {
        let script = env.script(
            &format!("{name}.json"),
            json!([
                calls("Wait.", vec![run("wait", "sleep 3")]),
                calls("Fix.", vec![fix_add()]),
                end_turn("Done."),
            ]),
        );
        env.fix_cmd(
            &repo,
            &script,
            &format!("agent/{name}"),
            &["--test-cmd", CHECK],
        )
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
    };
    let (a, b) = (start("a"), start("b"));
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(
        a.status.success() && b.status.success(),
        "{}\n{}",
        stderr(&a),
        stderr(&b)
    );
    let (tree_a, tree_b) = (work_tree(&stderr(&a)), work_tree(&stderr(&b)));
    assert_ne!(tree_a, tree_b, "{}\n{}", stderr(&a), stderr(&b));
    assert_eq!(
        linked_trees(&env, &repo).len(),
        2,
        "both went to the pool:\n{}\n{}",
        stderr(&a),
        stderr(&b)
    );

    let gc = env.agent(&repo, &["gc"]);
    assert_eq!(code(&gc), 0, "{}", stderr(&gc));
    assert!(
        stdout(&gc).contains("kept for the next runs"),
        "{}",
        stdout(&gc)
    );
    assert!(linked_trees(&env, &repo).is_empty());
    assert!(!tree_a.exists() && !tree_b.exists());
    for branch in ["agent/a", "agent/b"] {
        env.git(&repo, &["rev-parse", "--verify", branch]);
    }
    assert_eq!(UserState::capture(&env, &repo), before);
}

fn if_failing(env: &TestEnv, repo: &Path, command: &str, extra: &[&str]) -> (Value, String) {
    let script = env.script("none.json", json!([]));
    let mut args = vec!["--if-failing", "--json", "--test-cmd", command];
    args.extend_from_slice(extra);
    let out = env.fix(repo, &script, "agent/if-failing", &args);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    (serde_json::from_str(&stdout(&out)).unwrap(), stderr(&out))
}

#[test]
fn if_failing_on_a_passing_repository_needs_no_work_tree_and_answers_from_the_record_next() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[("calc.py", CALC_FIXED), ("test_calc.py", TEST_CALC)],
    );
    let before = UserState::capture(&env, &repo);
    let no_trace = || {
        assert!(linked_trees(&env, &repo).is_empty());
        assert!(!repo.join(".git/agent-git/pool-1").exists());
        assert_eq!(env.git(&repo, &["branch", "--list", "agent/*"]), "");
    };

    let (first, said) = if_failing(&env, &repo, CHECK, &[]);
    assert_eq!(first["outcome"], "already-passing");
    assert_eq!(first["tests"]["cached"], false);
    assert!(!said.contains("work tree"), "{said}");
    no_trace();

    let (second, said) = if_failing(&env, &repo, CHECK, &[]);
    assert_eq!(second["outcome"], "already-passing");
    assert_eq!(second["tests"]["cached"], true, "{second}");
    assert!(
        !said.contains("tests before any change"),
        "nothing ran: {said}"
    );
    no_trace();

    let other = format!("{CHECK} && true");
    let (changed, _) = if_failing(&env, &repo, &other, &[]);
    assert_eq!(
        changed["tests"]["cached"], false,
        "another command is another question"
    );
    let (unconfined, _) = if_failing(&env, &repo, CHECK, &["--sandbox", "off"]);
    assert_eq!(
        unconfined["tests"]["cached"], false,
        "so are tests without the sandbox"
    );
    no_trace();
    assert_eq!(UserState::capture(&env, &repo), before);
}

#[test]
fn if_failing_on_a_failing_repository_tests_the_base_once() {
    let env = TestEnv::new();
    let log = env.path().join("log");
    std::fs::create_dir(&log).unwrap();
    // Each test run says whether it tested the base (the adder still subtracts) or the fix.
    let counted = format!(
        "(grep -qs 'a - b' *.py && echo base || echo fix) >> {}/runs; {CHECK}",
        log.display()
    );
    let runs = |extra: &[&str], branch: &str| {
        let _ = std::fs::remove_file(log.join("runs"));
        let repo = env.repo(branch, &[("calc.py", CALC), ("test_calc.py", TEST_CALC)]);
        let before = UserState::capture(&env, &repo);
        let mut args = vec![
            "--test-cmd",
            &counted,
            "--allow-write",
            log.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = env.fix_scripted(
            &repo,
            "agent/fix",
            json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]),
            &args,
        );
        assert_eq!(out.code(), 0, "{}", out.stderr());
        assert_eq!(UserState::capture(&env, &repo), before);
        let log = std::fs::read_to_string(log.join("runs")).unwrap();
        log.lines().filter(|l| *l == "base").count()
    };
    assert_eq!(runs(&[], "a"), 1);
    assert_eq!(runs(&["--if-failing"], "b"), 1, "the base is tested once");
}

#[test]
fn the_clean_room_is_checked_out_by_a_process_of_its_own() {
    let env = TestEnv::new();
    let repo = repo(&env);
    let tree = env
        .git(&repo, &["rev-parse", "HEAD^{tree}"])
        .trim()
        .to_string();
    let room = env.path().join("room");
    let git = room.join("git");
    let work = room.join("tree");
    std::fs::create_dir_all(&work).unwrap();
    env.git(&room, &["init", "-q", "--bare", "git"]);
    let objects = repo.join(".git/objects");
    std::fs::write(
        git.join("objects/info/alternates"),
        format!("{}\n", objects.display()),
    )
    .unwrap();
    let (git_s, work_s) = (git.display().to_string(), work.display().to_string());

    let done = env.agent(&room, &["check-out-room", &git_s, &work_s, &tree]);
    assert_eq!(code(&done), 0, "{}", stderr(&done));
    assert_eq!(
        snapshot_dir(&work),
        snapshot_dir(&repo)
            .into_iter()
            .filter(|(path, _)| !path.starts_with(".git"))
            .collect(),
        "every file of the tree, as committed"
    );

    let bad = env.agent(&room, &["check-out-room", &git_s, &work_s, "nonsense"]);
    assert_eq!(code(&bad), 2);
    assert!(
        stderr(&bad).contains("not a tree id: nonsense"),
        "{}",
        stderr(&bad)
    );
    let missing = "0123456789012345678901234567890123456789";
    let absent = env.agent(&room, &["check-out-room", &git_s, &work_s, missing]);
    assert_eq!(code(&absent), 4, "{}", stderr(&absent));
    assert!(stderr(&absent).contains(missing), "{}", stderr(&absent));
}

/// The processes whose parent is `parent` and whose arguments include `arg`.
fn children_running(parent: u32, arg: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let after = stat.rfind(')').map_or("", |at| &stat[at + 2..]);
        let ppid: u32 = after
            .split(' ')
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if ppid == parent && cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

#[test]
fn a_run_ended_by_a_second_ctrl_c_takes_its_checkout_with_it() {
    let env = TestEnv::new();
    let mut owned: Vec<(String, String)> = (0..5_000)
        .map(|i| (format!("d{}/f{i}.txt", i / 100), format!("{i}\n")))
        .collect();
    owned.push(("calc.py".into(), CALC.into()));
    owned.push(("test_calc.py".into(), TEST_CALC.into()));
    let files: Vec<(&str, &str)> = owned
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let repo = env.repo("big", &files);
    let script = env.script("a.json", json!([end_turn("Done.")]));
    let mut run = env
        .fix_cmd(&repo, &script, "agent/a", &["--test-cmd", CHECK])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let checkout = loop {
        if let Some(pid) = children_running(run.id(), "add-work-tree").first() {
            break *pid;
        }
        assert!(
            started.elapsed().as_secs() < 60,
            "no add-work-tree process seen"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    interrupt(&run);
    std::thread::sleep(std::time::Duration::from_millis(50));
    interrupt(&run);
    assert_eq!(run.wait().unwrap().code(), Some(130));
    // The kernel kills it as its parent ends; a moment for that to be seen.
    let gone = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        !alive(checkout)
    });
    assert!(gone, "the checkout outlived the run that started it");
}

/// Run one leaves `planting` behind (its own shell command, in the default sandbox); run two,
/// on the same base, takes the pooled tree and runs `look`: what it printed.
fn leave_then_look(
    env: &TestEnv,
    repo: &Path,
    planting: &str,
    look: &str,
    extra: &[&str],
) -> String {
    let mut args = vec!["--test-cmd", CHECK];
    args.extend_from_slice(extra);
    let first = env.fix_scripted(
        repo,
        "agent/one",
        json!([
            calls("Plant.", vec![run("plant", planting)]),
            end_turn("Done.")
        ]),
        &args,
    );
    let (failed, said) = &first.results()["plant"];
    assert!(!failed, "{said}\n{}", first.stderr());
    let tree = work_tree(&first.stderr());
    assert!(tree.ends_with("agent-git/pool-1"), "{}", first.stderr());
    let second = env.fix_scripted(
        repo,
        "agent/two",
        json!([calls("Look.", vec![run("look", look)]), end_turn("Done.")]),
        &args,
    );
    assert_eq!(work_tree(&second.stderr()), tree, "{}", second.stderr());
    second.results()["look"].1.clone()
}

const FRESH_TREE: &str = ".\n./.gitignore\n./calc.py\n./docs\n./docs/notes.md\n./src\n./src/pkg\n\
                     ./src/pkg/mod.py\n./test_calc.py\n";

/// A pooled tree that cannot be made clean where it stands (its HEAD names a commit that is
/// not there, so the sweep has no tree to hold it to) is checked out anew in its slot, at the
/// first wait for it: the run's tools see a fresh tree, and the run goes on and passes.
#[test]
fn a_pooled_tree_that_cannot_be_reused_is_checked_out_anew_before_any_tool_sees_it() {
    let env = TestEnv::new();
    let repo = repo(&env);
    let args = ["--test-cmd", CHECK];
    let tree = pooled_after_a_run(&env, &repo, &args);
    std::fs::write(tree.join("left.txt"), "from run one\n").unwrap();
    // A reuse would keep this file's old time; a checkout anew writes it now.
    let untouched = tree.join("test_calc.py");
    let old = made_old(&untouched);
    let head = repo.join(".git/worktrees/agent-git-pool-1/HEAD");
    std::fs::write(&head, format!("{}\n", "1".repeat(40))).unwrap();

    let second = env.fix_scripted(
        &repo,
        "agent/two",
        json!([
            calls("Look first.", vec![run("list", LIST), fix_add()]),
            end_turn("Fixed.")
        ]),
        &args,
    );
    assert_eq!(second.code(), 0, "{}", second.stderr());
    assert_eq!(work_tree(&second.stderr()), tree, "{}", second.stderr());
    let (_, listing) = &second.results()["list"];
    assert!(
        listing.contains(FRESH_TREE),
        "the model saw a tree not checked out anew: {listing}"
    );
    let now = std::fs::metadata(&untouched).unwrap().modified().unwrap();
    assert_ne!(now, old, "the tree was not checked out anew");
    assert_eq!(
        env.git(&repo, &["diff", "--name-only", "main", "agent/two"]),
        "calc.py\n"
    );
    assert_eq!(linked_trees(&env, &repo), vec![tree.display().to_string()]);
}

/// libgit2's status skips any entry named `.git` in any case (`.GIT`, `.Git`: iterator.c
/// `filesystem_iterator_is_dot_git`), FIFOs, sockets and device nodes ("wacky things"), and
/// never looks at a folder's own mode. None of it may stay, nor a folder left read-only
/// (the next run could not make files in it), nor an empty folder.
#[test]
fn what_git_status_passes_over_is_not_left_for_the_next_run() {
    let env = TestEnv::new();
    let repo = repo(&env);
    let planting =
        "mkdir -p src/pkg/.GIT empty/deeper && echo from-run-one > src/pkg/.GIT/evil.py \
         && echo from-run-one > docs/.Git && mkfifo src/pkg/pipe \
         && python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"docs/sock\")' \
         && chmod 555 src/pkg";
    let look = "find . -path ./.git -prune -o -print | LC_ALL=C sort; stat -c '%a' src/pkg; \
                touch src/pkg/new.py 2>&1 || true";
    let seen = leave_then_look(&env, &repo, planting, look, &[]);
    assert!(
        seen.contains(&format!("{FRESH_TREE}755\n")),
        "the next run saw what run one left: {seen}"
    );
}

/// With `core.trustctime=false` (a documented git setting), a tracked file rewritten with the
/// same size and its modification time put back looks unchanged to a status.
#[test]
fn a_same_size_rewrite_is_not_left_where_change_times_are_not_trusted() {
    let env = TestEnv::new();
    let repo = repo(&env);
    env.git(&repo, &["config", "core.trustctime", "false"]);
    let planting = "t=$(stat -c %y src/pkg/mod.py); printf 'VALUE = 2\\n' > src/pkg/mod.py; \
                    touch -d \"$t\" src/pkg/mod.py";
    let look = "cat src/pkg/mod.py; echo 'OTHER = 3' >> src/pkg/mod.py";
    let seen = leave_then_look(&env, &repo, planting, look, &[]);
    let committed = env.git(
        &repo,
        &["diff", "main", "agent/two", "--", "src/pkg/mod.py"],
    );
    assert!(
        seen.contains("VALUE = 1") && !committed.contains("+VALUE = 2"),
        "the next run saw run one's file, and committed it: {seen}\n{committed}"
    );
}

/// Where change times are trusted (git's default), the sweep tells an unchanged file from its
/// stat data alone: a same-size rewrite with its modification time put back still moved its
/// change time, which no command can set back.
#[test]
fn a_same_size_rewrite_with_its_time_put_back_is_not_left_for_the_next_run() {
    let env = TestEnv::new();
    let repo = repo(&env);
    let args = ["--test-cmd", CHECK];
    let tree = pooled_after_a_run(&env, &repo, &args);
    // The index written again a tick after its files: no entry is racily clean, so only the
    // stat data can tell.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let touched = tree.join(".gitignore");
    std::fs::write(&touched, std::fs::read(&touched).unwrap()).unwrap();
    env.git(&tree, &["add", ".gitignore"]);
    let module = tree.join("src/pkg/mod.py");
    let was = std::fs::metadata(&module).unwrap().modified().unwrap();
    std::fs::write(&module, "VALUE = 2\n").unwrap();
    let file = std::fs::File::options().write(true).open(&module).unwrap();
    file.set_modified(was).unwrap();
    drop(file);

    sees_the_base_module(&env, &repo, &tree, &args);
}

/// Gives the file at `path` a modification time long past, and says it.
fn made_old(path: &Path) -> std::time::SystemTime {
    let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(978_307_200);
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(old).unwrap();
    old
}

/// The pooled tree a run that changed nothing handed back.
fn pooled_after_a_run(env: &TestEnv, repo: &Path, args: &[&str]) -> PathBuf {
    let first = env.fix_scripted(repo, "agent/one", json!([end_turn("Done.")]), args);
    let tree = work_tree(&first.stderr());
    assert!(tree.ends_with("agent-git/pool-1"), "{}", first.stderr());
    tree
}

/// A second run on the base takes the pooled tree at `tree` and finds `src/pkg/mod.py` as the
/// base has it, not as something left it (`VALUE = 2`).
fn sees_the_base_module(env: &TestEnv, repo: &Path, tree: &Path, args: &[&str]) {
    let second = env.fix_scripted(
        repo,
        "agent/two",
        json!([
            calls("Look.", vec![run("look", "cat src/pkg/mod.py")]),
            end_turn("Done.")
        ]),
        args,
    );
    assert_eq!(work_tree(&second.stderr()), tree, "{}", second.stderr());
    let seen = &second.results()["look"].1;
    assert!(
        seen.contains("VALUE = 1") && !seen.contains("VALUE = 2"),
        "the next run saw what was left in the tree: {seen}"
    );
}

/// Commits a submodule at `vendor/lib` (the repository's own commit: only the entry counts).
fn add_submodule(env: &TestEnv, repo: &Path) {
    let head = env.git(repo, &["rev-parse", "HEAD"]).trim().to_string();
    let cacheinfo = format!("160000,{head},vendor/lib");
    env.git(repo, &["update-index", "--add", "--cacheinfo", &cacheinfo]);
    env.git(repo, &["commit", "-q", "-m", "a submodule"]);
}

/// The files a run writes in a submodule's folder (empty in a fresh checkout), which a status
/// passes over, and the mode it gives the folder.
#[test]
fn a_submodule_folder_is_left_empty_and_as_checked_out() {
    let env = TestEnv::new();
    let repo = repo(&env);
    add_submodule(&env, &repo);
    let planting = "mkdir -p vendor/lib && echo from-run-one > vendor/lib/evil.py \
                    && chmod 500 vendor/lib";
    let look = "stat -c '%a' vendor/lib; ls -A vendor/lib; echo end";
    let seen = leave_then_look(&env, &repo, planting, look, &[]);
    assert!(
        seen.contains("755\nend"),
        "the next run saw run one's file or mode: {seen}"
    );
}

/// With `core.ignorecase=true` (a repository made on macOS or Windows, copied here), the
/// status takes `Calc.py` for `calc.py`.
#[test]
fn case_variants_are_not_left_where_git_ignores_case() {
    let env = TestEnv::new();
    let repo = repo(&env);
    env.git(&repo, &["config", "core.ignorecase", "true"]);
    let planting = "echo evil > Calc.py && mkdir -p SRC/pkg && echo evil > SRC/pkg/mod.py";
    let look = "find . -path ./.git -prune -o -print | LC_ALL=C sort";
    let seen = leave_then_look(&env, &repo, planting, look, &[]);
    assert!(
        seen.contains(FRESH_TREE),
        "the next run saw what run one left: {seen}"
    );
}

// What a run can leave in place of what the commit tracks.

/// libgit2's status sees only a file's owner-x bit: a tracked file made read-only, private or
/// setuid stays so for the next run, where a fresh checkout writes 644.
#[test]
fn tracked_file_modes_are_not_left_for_the_next_run() {
    let env = TestEnv::new();
    let repo = repo(&env);
    let planting = "chmod 444 calc.py && chmod 600 docs/notes.md && chmod 4644 src/pkg/mod.py";
    let look = "stat -c '%a %n' calc.py docs/notes.md src/pkg/mod.py";
    let seen = leave_then_look(&env, &repo, planting, look, &[]);
    assert!(
        seen.contains("644 calc.py\n644 docs/notes.md\n644 src/pkg/mod.py"),
        "the next run saw run one's modes: {seen}"
    );
}

/// The pooled tree's record of when it was last exact lets the next take pass over what last
/// changed before it; renames move only the change times of what they move and of the folders
/// whose names change, so folders and files swapped by name between runs (by anything: what a
/// run does is committed, and the checkout writes it again), their insides untouched, must
/// still be seen: each at its path holds what the base has there.
#[test]
fn folders_and_files_swapped_by_name_are_not_left_for_the_next_run() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", TEST_CALC),
            ("one.txt", "top one\n"),
            ("two.txt", "top two\n"),
            ("lib/a/in/x.txt", "from a\n"),
            ("lib/b/in/x.txt", "from b\n"),
            ("c/in/x.txt", "from c\n"),
            ("c/d/x.txt", "from d\n"),
        ],
    );
    let args = ["--test-cmd", CHECK];
    let tree = pooled_after_a_run(&env, &repo, &args);
    let swap = |a: &str, b: &str| {
        let (a, b, t) = (tree.join(a), tree.join(b), tree.join("swapping"));
        std::fs::rename(&a, &t).unwrap();
        std::fs::rename(&b, &a).unwrap();
        std::fs::rename(&t, &b).unwrap();
    };
    swap("one.txt", "two.txt");
    swap("lib/a", "lib/b");
    // Files swapped across folders, the folders themselves left in place.
    swap("c/in/x.txt", "c/d/x.txt");

    let look = "cat one.txt two.txt lib/a/in/x.txt lib/b/in/x.txt c/in/x.txt c/d/x.txt";
    let second = env.fix_scripted(
        &repo,
        "agent/two",
        json!([calls("Look.", vec![run("look", look)]), end_turn("Done.")]),
        &args,
    );
    assert_eq!(work_tree(&second.stderr()), tree, "{}", second.stderr());
    let seen = &second.results()["look"].1;
    assert!(
        seen.contains("top one\ntop two\nfrom a\nfrom b\nfrom c\nfrom d\n"),
        "the next run saw the swaps: {seen}"
    );
}

/// The line of the pooled tree's record is kept in its text: a chmod or a touch of the record
/// after a change (which a sandbox of Landlock alone lets a run make beside its tree) does not
/// move it past the change.
#[test]
fn a_record_touched_after_a_change_does_not_hide_it() {
    let env = TestEnv::new();
    let repo = repo(&env);
    let args = ["--test-cmd", CHECK];
    let tree = pooled_after_a_run(&env, &repo, &args);
    std::fs::write(tree.join("src/pkg/mod.py"), "VALUE = 2\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let record = repo.join(".git/agent-git/pool-1.clean");
    let mode = std::fs::metadata(&record).unwrap().permissions().mode();
    std::fs::set_permissions(&record, std::fs::Permissions::from_mode(mode)).unwrap();
    let file = std::fs::File::options().write(true).open(&record).unwrap();
    file.set_modified(std::time::SystemTime::now()).unwrap();
    drop(file);
    sees_the_base_module(&env, &repo, &tree, &args);
}

/// The record of when the pooled tree was last exact is out of the run's reach, and speaks
/// of one folder: another put in its place, however old its insides, is looked at whole.
#[test]
fn a_record_of_an_exact_tree_speaks_only_of_the_folder_it_was_taken_of() {
    let env = TestEnv::new();
    let repo = repo(&env);
    let args = ["--test-cmd", CHECK];
    // A tree like the base but for one file, made before run one's take writes its record:
    // every change time in it is older than the record's.
    let other = env.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let archive = env.git(
        &repo,
        &["archive", "--format=tar", "-o", "../base.tar", "main"],
    );
    assert!(archive.is_empty(), "{archive}");
    // With the modes a checkout gives (git archive's are 664).
    let unpacked = std::process::Command::new("tar")
        .args(["--no-same-permissions", "-xf"])
        .arg(repo.with_file_name("base.tar"))
        .current_dir(&other)
        .status()
        .unwrap();
    assert!(unpacked.success());
    std::fs::write(other.join("src/pkg/mod.py"), "VALUE = 2\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));

    let forge = run("forge", "echo forged > ../pool-1.clean");
    let first = env.fix_scripted(
        &repo,
        "agent/one",
        json!([calls("Forge.", vec![forge]), end_turn("Done.")]),
        &args,
    );
    let said = &first.results()["forge"].1;
    assert!(
        said.starts_with("exit code ") && !said.starts_with("exit code 0"),
        "a run wrote beside its work tree: {said}"
    );
    let tree = work_tree(&first.stderr());
    assert!(tree.ends_with("agent-git/pool-1"), "{}", first.stderr());
    let record = repo.join(".git/agent-git/pool-1.clean");
    let text = std::fs::read_to_string(&record).expect("the take left a record");
    assert!(!text.contains("forged"), "{text}");

    // The other tree put in the slot's place, with the slot's link to its git dir: only its
    // top has moved since the record.
    std::fs::copy(tree.join(".git"), other.join(".git")).unwrap();
    std::fs::remove_dir_all(&tree).unwrap();
    std::fs::rename(&other, &tree).unwrap();
    sees_the_base_module(&env, &repo, &tree, &args);
}

/// Two tracked files with the same content (empty `__init__.py`s) hard-linked by run one look
/// unchanged to a status; the next run's checkout writes a path whose base moved in place
/// (O_TRUNC), so the other path changes too, and the next run commits that.
#[test]
fn hard_links_between_tracked_files_are_not_left_for_the_next_run() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", TEST_CALC),
            ("src/__init__.py", ""),
            ("src/pkg/__init__.py", ""),
        ],
    );
    let args = ["--test-cmd", CHECK];
    let first = env.fix_scripted(
        &repo,
        "agent/one",
        json!([
            calls(
                "Plant.",
                vec![run("plant", "ln -f src/__init__.py src/pkg/__init__.py")]
            ),
            end_turn("Done.")
        ]),
        &args,
    );
    let tree = work_tree(&first.stderr());
    assert!(tree.ends_with("agent-git/pool-1"), "{}", first.stderr());
    // The user moves on: the next run's base changes one of the two.
    std::fs::write(repo.join("src/__init__.py"), "X = 1\n").unwrap();
    env.git(&repo, &["commit", "-qam", "src: X"]);
    let look = "stat -c '%h %n' src/pkg/__init__.py; cat src/pkg/__init__.py; echo end";
    let second = env.fix_scripted(
        &repo,
        "agent/two",
        json!([calls("Look.", vec![run("look", look)]), end_turn("Done.")]),
        &args,
    );
    assert_eq!(work_tree(&second.stderr()), tree, "{}", second.stderr());
    let seen = &second.results()["look"].1;
    let committed = env.git(&repo, &["diff", "--stat", "main", "agent/two"]);
    assert!(
        seen.contains("1 src/pkg/__init__.py\nend") && !committed.contains("src/pkg"),
        "the next run saw a linked file, and committed it: {seen}\n{committed}"
    );
}

/// The sweep joins the held commit's entry names to the tree's path as they are: a name that
/// is absolute (or `..`) takes it out of the tree. With `--sandbox off`, a command of run one
/// left running (`setsid`) can write a tree object with such a name and point the pooled
/// tree's HEAD at a branch holding it, after run one handed the tree back; here the test does
/// that in its place. The next run's start releases the "abandoned" slot, sweeping that tree
/// (no index is read from it first, so no path is checked).
#[test]
fn the_sweep_never_leaves_the_pooled_tree_whatever_the_held_tree_names() {
    let env = TestEnv::new();
    let repo = repo(&env);
    let outside = env.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("keep.txt"), "the user's").unwrap();
    let args = ["--test-cmd", CHECK];
    let first = env.fix_scripted(
        &repo,
        "agent/one",
        json!([calls("Look.", vec![run("look", "true")]), end_turn("Done.")]),
        &args,
    );
    let tree = work_tree(&first.stderr());
    assert!(tree.ends_with("agent-git/pool-1"), "{}", first.stderr());

    let git_in = |dir: &Path, args: &[&str], input: &[u8]| {
        use std::io::Write;
        let mut child = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        let out = child.wait_with_output().unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let empty = git_in(&repo, &["hash-object", "-t", "tree", "-w", "--stdin"], b"");
    let mut raw = b"40000 ".to_vec();
    raw.extend_from_slice(outside.to_str().unwrap().as_bytes());
    raw.push(0);
    raw.extend((0..20).map(|i| u8::from_str_radix(&empty[2 * i..2 * i + 2], 16).unwrap()));
    let args_literally = ["hash-object", "-t", "tree", "-w", "--literally", "--stdin"];
    let evil = git_in(&repo, &args_literally, &raw);
    let commit = env.git(&repo, &["commit-tree", &evil, "-m", "evil"]);
    env.git(&repo, &["update-ref", "refs/heads/evil", commit.trim()]);
    env.git(&tree, &["symbolic-ref", "HEAD", "refs/heads/evil"]);

    let second = env.fix_scripted(
        &repo,
        "agent/two",
        json!([calls("Look.", vec![run("look", "true")]), end_turn("Done.")]),
        &args,
    );
    assert!(
        outside.join("keep.txt").exists(),
        "the sweep removed a file outside the pooled tree: {}",
        second.stderr()
    );
}

/// An ignored folder nested deeper than the process may hold descriptors open (1024 on most
/// desktops): `remove_dir_all` holds one per level and fails, every time, so the tree cannot
/// be handed back nor cleared, and the slot's folder stays in the way of a fresh work tree.
#[test]
fn links_files_and_modes_in_place_of_tracked_folders_are_swept_in_the_tree_only() {
    let env = TestEnv::new();
    let repo = repo(&env);
    add_submodule(&env, &repo);
    // A tracked name that is not UTF-8.
    let odd = std::ffi::OsStr::from_bytes(b"b\xffd");
    std::fs::write(repo.join(odd), "odd\n").unwrap();
    env.git(&repo, &["add", "--", "b?d"]);
    env.git(&repo, &["commit", "-q", "-m", "an odd name"]);
    let outside = env.path().join("outside");
    std::fs::create_dir_all(outside.join("sub")).unwrap();
    std::fs::write(outside.join("keep.txt"), "the user's").unwrap();
    std::fs::write(outside.join("sub/keep.txt"), "the user's").unwrap();
    let o = outside.display();
    let planting = format!(
        "rm -rf docs && ln -s {o} docs && rm -rf src/pkg && ln -s {o}/sub src/pkg \
         && mkdir -p vendor && rmdir vendor/lib 2>/dev/null; ln -s {o} vendor/lib \
         && touch \"$(printf 'odd\\377\\nname')\" \
         && mkdir -p deep/a/b && ln -s {o} deep/a/b/out && chmod 000 deep/a && chmod 600 src \
         && chmod 700 ."
    );
    let look = "find . -path ./.git -prune -o -print | LC_ALL=C sort; stat -c '%a' . src";
    // Planted after run one handed the tree back (as a command left running with
    // `--sandbox off` could): run one's own commits would undo most of it.
    let args = ["--test-cmd", CHECK];
    let first = env.fix_scripted(
        &repo,
        "agent/one",
        json!([calls("Look.", vec![run("look", "true")]), end_turn("Done.")]),
        &args,
    );
    let tree = work_tree(&first.stderr());
    let out = std::process::Command::new("sh")
        .args(["-c", &planting])
        .current_dir(&tree)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let second = env.fix_scripted(
        &repo,
        "agent/two",
        json!([calls("Look.", vec![run("look", look)]), end_turn("Done.")]),
        &args,
    );
    assert_eq!(work_tree(&second.stderr()), tree, "{}", second.stderr());
    let seen = second.results()["look"].1.clone();
    assert_eq!(std::fs::read(tree.join(odd)).unwrap(), b"odd\n");
    let fresh =
        ".\n./.gitignore\n./b\u{fffd}d\n./calc.py\n./docs\n./docs/notes.md\n./src\n./src/pkg\n\
                 ./src/pkg/mod.py\n./test_calc.py\n./vendor\n./vendor/lib\n755\n755\n";
    assert!(
        seen.contains(fresh),
        "the next run saw what run one left: {seen}"
    );
    assert!(outside.join("keep.txt").exists() && outside.join("sub/keep.txt").exists());
    assert_eq!(
        std::fs::metadata(&outside).unwrap().permissions().mode() & 0o777,
        0o755
    );
}

/// A pipe where a tracked file was. Staging it must not open it (it would wait for a writer),
/// so the run that plants it ends by itself. A run killed before it gave its slot back leaves
/// the pipe there, and the next run's checkout of that path must not open it either (it would
/// wait for a reader, forever).
#[test]
fn a_pipe_in_place_of_a_tracked_file_hangs_no_run() {
    let env = TestEnv::new();
    let repo = repo(&env);
    let wait_for = |child: &mut std::process::Child, secs: u64| {
        for _ in 0..secs * 10 {
            if child.try_wait().unwrap().is_some() {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        false
    };
    let one = env.script(
        "one.json",
        json!([
            calls("Plant.", vec![run("plant", "rm calc.py && mkfifo calc.py")]),
            end_turn("Done.")
        ]),
    );
    let args = ["--test-cmd", CHECK];
    let mut first = env
        .fix_cmd(&repo, &one, "agent/one", &args)
        .spawn()
        .unwrap();
    assert!(wait_for(&mut first, 20), "the run that planted a pipe hung");
    // Where a run killed before its give-back would have left it.
    let slot = repo.join(".git/agent-git/pool-1");
    let pipe = slot.join("calc.py");
    std::fs::remove_file(&pipe).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &pipe,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let two = env.script(
        "two.json",
        json!([calls("Look.", vec![run("look", "true")]), end_turn("Done.")]),
    );
    let mut second = env
        .fix_cmd(&repo, &two, "agent/two", &args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let second_ended = wait_for(&mut second, 60);
    let mut said = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut said).unwrap();
    assert!(second_ended, "the next run hung at its start: {said}");
    assert!(
        said.contains(&format!("(work tree {})", slot.display())),
        "the next run did not take the slot with the pipe: {said}"
    );
}

/// The lasting clean rooms of this user in `tmp`.
fn rooms_in(tmp: &Path) -> Vec<PathBuf> {
    let mut rooms: Vec<PathBuf> = std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("agent-git-room-")
        })
        .map(|e| e.path())
        .collect();
    rooms.sort();
    rooms
}

/// The next run resets the clean room the last one kept, by what differs, and trusts nothing
/// changed in it meanwhile: a test file made to pass there (its times put back) is written
/// anew before the tests run.
#[test]
fn the_next_run_resets_the_kept_clean_room_and_trusts_nothing_changed_in_it() {
    use std::os::unix::fs::MetadataExt;
    let env = TestEnv::new();
    let repo = repo(&env);
    let tmp = env.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let with_tmp = |cmd: &mut std::process::Command| {
        cmd.env("TMPDIR", &tmp);
    };
    let replies = json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]);
    let first = env.fix_scripted_with(&repo, "agent/first", replies, &[], with_tmp);
    assert_eq!(first.code(), 0, "{}", first.stderr());
    let rooms = rooms_in(&tmp);
    assert_eq!(rooms.len(), 1, "{rooms:?}");
    let tree = rooms[0].join("tree");
    assert!(
        rooms[0].join("state").is_file(),
        "the room is kept with its state"
    );
    let notes = std::fs::metadata(tree.join("docs/notes.md")).unwrap().ino();

    let test = tree.join("test_calc.py");
    let times = std::fs::metadata(&test).unwrap().modified().unwrap();
    std::fs::write(&test, "def test_add():\n    assert True\n").unwrap();
    let file = std::fs::File::options().write(true).open(&test).unwrap();
    file.set_modified(times).unwrap();
    drop(file);

    let second = env.fix_scripted_with(
        &repo,
        "agent/second",
        json!([end_turn("Nothing to do.")]),
        &["--json"],
        with_tmp,
    );
    let json: Value = serde_json::from_str(stdout(&second.out).trim()).unwrap();
    assert_ne!(json["outcome"], "passed", "{json}");
    assert_eq!(json["tests"]["summary"], "1 passed, 1 failed", "{json}");
    assert_eq!(rooms_in(&tmp), rooms, "the same room");
    assert_eq!(std::fs::read_to_string(&test).unwrap(), TEST_CALC);
    assert_eq!(
        std::fs::metadata(tree.join("docs/notes.md")).unwrap().ino(),
        notes,
        "a file no tree changed is not written again"
    );
}

/// A run in a kept clean room that did not hold what it was taken to leaves nothing for the
/// run that counts: here a test script changed in the room between runs writes into the
/// build cache, which the honest script then takes for a pass. The base still fails.
#[test]
fn a_changed_kept_room_leaves_nothing_in_the_build_cache_for_the_run_that_counts() {
    let env = TestEnv::new();
    let script = "test -e \"$CARGO_TARGET_DIR/built\" && exit 0\n\
                  python3 -c 'import calc; assert calc.add(2, 3) == 5'\n";
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("t.sh", script),
            ("docs/notes.md", "notes\n"),
        ],
    );
    let tmp = env.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let with_tmp = |cmd: &mut std::process::Command| {
        cmd.env("TMPDIR", &tmp);
    };
    let args = ["--test-cmd", "sh t.sh", "--json"];
    let replies = json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]);
    let first = env.fix_scripted_with(&repo, "agent/first", replies, &args, with_tmp);
    assert_eq!(first.code(), 0, "{}", first.stderr());
    let rooms = rooms_in(&tmp);
    assert_eq!(rooms.len(), 1, "{rooms:?}");
    let kept = rooms[0].join("tree/t.sh");
    std::fs::write(&kept, "touch \"$CARGO_TARGET_DIR/built\"; exit 1\n").unwrap();

    let second = env.fix_scripted_with(
        &repo,
        "agent/second",
        json!([end_turn("Nothing to do.")]),
        &args,
        with_tmp,
    );
    let json: Value = serde_json::from_str(stdout(&second.out).trim()).unwrap();
    assert_ne!(json["outcome"], "passed", "{json}");
    assert_eq!(json["tests"]["passed"], false, "{json}");
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), script);
}
