//! Test runs see the clean room's tree through an overlay of their own: what one writes,
//! changes or removes there lands in a layer thrown away after it, so the next run finds the
//! tree as committed without a walk of it. The setup command writes for real.

use crate::common::*;
use serde_json::{json, Value};

/// Appends `overlay` or `plain` to `log`: whether the working directory is an overlay mount.
fn note_mount(log: &str) -> String {
    format!(
        "if awk -v d=\"$PWD\" '$5 == d && / - overlay /' /proc/self/mountinfo | grep -q .; \
         then echo overlay >> {log}; else echo plain >> {log}; fi"
    )
}

#[test]
fn test_runs_change_the_tree_only_through_an_overlay_and_the_setup_for_real() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", UNITTEST_CALC),
            ("data.txt", "committed\n"),
            (".gitignore", "__pycache__/\nmade_by_setup\n"),
        ],
    );
    let log = env.path().join("log");
    std::fs::create_dir(&log).unwrap();
    let dir = log.display();
    let setup = format!(
        "echo made > made_by_setup; {}",
        note_mount(&format!("{dir}/setup"))
    );
    // Each test run finds the tree and the setup's output as they were made, then changes
    // them all: a tracked file, a new file, the setup's output; and tries to write the note
    // that says an overlay held, beside the tree.
    let test = [
        note_mount(&format!("{dir}/runs")),
        "grep -q 'a test run was here' data.txt && exit 5".to_string(),
        "test -e planted && exit 4".to_string(),
        "test \"$(cat made_by_setup)\" = made || exit 6".to_string(),
        "echo 'a test run was here' >> data.txt".to_string(),
        "echo planted > planted; echo more >> made_by_setup".to_string(),
        format!(
            "if touch \"$(dirname \"$PWD\")/overlay/held\" 2>/dev/null; \
             then echo forged >> {dir}/forged; fi"
        ),
        "python3 -m unittest -v".to_string(),
    ]
    .join("; ");
    let log_arg = log.display().to_string();
    let run = env.fix_scripted(
        &repo,
        "agent/overlay",
        json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]),
        &[
            "--test-cmd",
            &test,
            "--setup-cmd",
            &setup,
            "--allow-write",
            &log_arg,
            "--json",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let json: Value = serde_json::from_str(stdout(&run.out).trim()).unwrap();
    assert_eq!(json["outcome"], "passed", "{json}");

    let lines = |name: &str| -> Vec<String> {
        std::fs::read_to_string(log.join(name))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    };
    // Before any change (fails), after the fix (passes), and that pass again from a fresh
    // setup (the one it stood on was made from the base's tree).
    let runs = lines("runs");
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert!(runs.iter().all(|m| m == "overlay"), "{runs:?}");
    let setups = lines("setup");
    assert!(!setups.is_empty());
    assert!(setups.iter().all(|m| m == "plain"), "{setups:?}");
    assert!(
        !log.join("forged").exists(),
        "a test run wrote the overlay's note"
    );
    // What the tests changed is in no commit either.
    let data = env.git(&repo, &["show", "agent/overlay:data.txt"]);
    assert_eq!(data, "committed\n");
}

/// With /tmp made writable on purpose (and the clean room in it), the model's commands still
/// cannot reach the room: other runs' folders stay covered, and the room is not trusted to be
/// as the last test run left it.
#[test]
fn an_allowed_tmp_does_not_open_the_clean_room_to_the_model() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", UNITTEST_CALC),
            ("README.md", "calc\n"),
        ],
    );
    let plant = "for t in /tmp/agent-git-clean-*/tree /tmp/agent-git-room-*/tree; do \
         sed -i 's/a - b/a + b/' \"$t/calc.py\"; done";
    let run = env.fix_scripted_with(
        &repo,
        "agent/tmp",
        json!([
            calls(
                "Touch the readme.",
                vec![
                    tool("c1", "run_command", json!({ "command": plant })),
                    tool(
                        "w1",
                        "write_file",
                        json!({"path": "README.md", "content": "calc!\n"})
                    ),
                ]
            ),
            end_turn("Done.")
        ]),
        &[
            "--test-cmd",
            "python3 -m unittest -v",
            "--allow-write",
            "/tmp",
            "--json",
        ],
        |cmd| {
            cmd.env("TMPDIR", "/tmp");
        },
    );
    let json: Value = serde_json::from_str(stdout(&run.out).trim()).unwrap();
    let path = std::env::var("PATH").unwrap();
    let (fresh, output) =
        export_and_test(&env, &repo, "agent/tmp", "python3 -m unittest -v", &path);
    assert!(!fresh, "the branch does not fix calc.py: {output}");
    assert_ne!(json["outcome"], "passed", "{json}");
}

/// What a setup command made where a later tree tracks something goes whole: what it wrote
/// beneath it is not kept as the next setup's output.
#[test]
fn a_setup_output_the_tree_comes_to_track_leaves_nothing_behind() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", UNITTEST_CALC),
            ("build.sh", "true\n"),
        ],
    );
    let make = "mkdir -p out && printf 'def add(a, b):\\n    return a + b\\n' > out/fix.py\n";
    let calc_try = "try:\n    from out.fix import add\nexcept ImportError:\n    \
                    def add(a, b):\n        return a - b\n\n\ndef multiply(a, b):\n    \
                    return a * b\n";
    let run = env.fix_scripted(
        &repo,
        "agent/out",
        json!([
            calls(
                "Generate.",
                vec![
                    tool(
                        "w1",
                        "write_file",
                        json!({"path": "build.sh", "content": make})
                    ),
                    tool(
                        "w2",
                        "write_file",
                        json!({"path": "calc.py", "content": calc_try})
                    ),
                    tool(
                        "w3",
                        "write_file",
                        json!({"path": "requirements.txt", "content": ""})
                    ),
                    tool("t1", "run_tests", json!({})),
                ]
            ),
            calls(
                "Stop generating; track out/.",
                vec![
                    tool(
                        "w4",
                        "write_file",
                        json!({"path": "build.sh", "content": "true\n"})
                    ),
                    tool(
                        "w5",
                        "write_file",
                        json!({"path": "out/NOTES.md", "content": "x\n"})
                    ),
                ]
            ),
            end_turn("Done.")
        ]),
        &[
            "--test-cmd",
            "python3 -m unittest -v",
            "--setup-cmd",
            "sh build.sh",
            "--json",
        ],
    );
    let json: Value = serde_json::from_str(stdout(&run.out).trim()).unwrap();
    let path = std::env::var("PATH").unwrap();
    let (fresh, output) = export_and_test(
        &env,
        &repo,
        "agent/out",
        "sh build.sh && python3 -m unittest -v",
        &path,
    );
    assert!(
        !fresh,
        "the branch's own setup makes no out/fix.py: {output}"
    );
    assert_ne!(json["outcome"], "passed", "{json}");
}

/// A test that moves a committed folder (which an overlay refuses, EXDEV) passes as it does in
/// a checkout: such a run is run again on the tree itself.
#[test]
fn a_test_that_renames_a_committed_folder_passes_as_in_a_checkout() {
    let env = TestEnv::new();
    let test = "import os, unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    \
                def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n    \
                def test_move_data(self):\n        os.rename('data', 'data.moved')\n        \
                os.rename('data.moved', 'data')\n";
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", test),
            ("data/a.txt", "a\n"),
        ],
    );
    let run = env.fix_scripted(
        &repo,
        "agent/move",
        json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]),
        &["--test-cmd", "python3 -m unittest -v", "--json"],
    );
    let json: Value = serde_json::from_str(stdout(&run.out).trim()).unwrap();
    let path = std::env::var("PATH").unwrap();
    let (fresh, output) =
        export_and_test(&env, &repo, "agent/move", "python3 -m unittest -v", &path);
    assert!(fresh, "{output}");
    assert_eq!(json["outcome"], "passed", "{json}");
}

/// A run on the tree itself (here: after EXDEV on the overlay, with /tmp allowed, so nothing is
/// undone in the background) puts a link in place of the folder that holds a setup output:
/// clearing the setup removes nothing the link leads to.
#[test]
fn clearing_a_setup_never_follows_a_link_a_test_run_planted() {
    let env = TestEnv::new();
    let victim = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("victim-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&victim);
    std::fs::create_dir_all(victim.join("out")).unwrap();
    std::fs::write(victim.join("out/precious.txt"), "user data\n").unwrap();
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", UNITTEST_CALC),
            ("lib/keep.txt", "keep\n"),
        ],
    );
    let stage =
        std::path::PathBuf::from(format!("/tmp/agent-git-test-stage-{}", std::process::id()));
    let _ = std::fs::remove_file(&stage);
    let st = stage.display();
    let v = victim.display();
    let test = format!(
        "if python3 -c 'import calc, sys; sys.exit(calc.add(2, 3) != 5)'; then \
           if [ -e {st} ]; then \
             if [ ! -L lib ]; then mv lib lib.old && ln -s {v} lib; fi; \
           else touch {st}; echo EXDEV; exit 1; fi; \
         fi; python3 -m unittest -v"
    );
    let run = env.fix_scripted(
        &repo,
        "agent/link",
        json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]),
        &[
            "--test-cmd",
            &test,
            "--setup-cmd",
            "mkdir -p lib/out",
            "--allow-write",
            "/tmp",
            "--json",
        ],
    );
    let _ = std::fs::remove_file(&stage);
    let survived = victim.join("out/precious.txt").exists();
    let _ = std::fs::remove_dir_all(&victim);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        survived,
        "the harness removed a file outside the clean room"
    );
}

/// Code under test that fails with "EXDEV" in its output and leaves a mark in the build cache
/// (CARGO_TARGET_DIR) does not find it when run again on the tree: the re-run starts as the
/// first run did.
#[test]
fn a_rerun_on_the_tree_finds_nothing_the_overlay_run_left_in_the_cache() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[("calc.py", CALC), ("test_calc.py", UNITTEST_CALC)],
    );
    let calc = "import os\n\n\
                MARK = os.path.join(os.environ.get('CARGO_TARGET_DIR', '/nonexistent'), 'seen')\n\
                SEEN = os.path.exists(MARK)\n\
                if not SEEN:\n    try:\n        open(MARK, 'w').close()\n    except OSError:\n        pass\n    print('EXDEV')\n\n\n\
                def add(a, b):\n    return a + b if SEEN else a - b\n\n\n\
                def multiply(a, b):\n    return a * b\n";
    let run = env.fix_scripted(
        &repo,
        "agent/mark",
        json!([
            calls(
                "Fix.",
                vec![tool(
                    "w1",
                    "write_file",
                    json!({"path": "calc.py", "content": calc})
                )]
            ),
            end_turn("Done.")
        ]),
        &["--test-cmd", "python3 -m 'unit'test -v", "--json"],
    );
    let json: Value = serde_json::from_str(stdout(&run.out).trim()).unwrap();
    let path = std::env::var("PATH").unwrap();
    let (fresh, output) =
        export_and_test(&env, &repo, "agent/mark", "python3 -m unittest -v", &path);
    assert!(!fresh, "a fresh checkout fails: {output}");
    assert_ne!(json["outcome"], "passed", "{json}");
}

/// A test run (here with the sandbox off, on the tree itself) that removes what the setup made
/// makes the setup run again, rather than ending the run.
#[test]
fn a_test_run_that_removes_a_setup_output_makes_the_setup_run_again() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[("calc.py", CALC), ("test_calc.py", UNITTEST_CALC)],
    );
    let run = env.fix_scripted(
        &repo,
        "agent/gone",
        json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]),
        &[
            "--test-cmd",
            "rm -rf out; python3 -m unittest -v",
            "--setup-cmd",
            "mkdir -p out",
            "--sandbox",
            "off",
            "--json",
        ],
    );
    let json: Value = serde_json::from_str(stdout(&run.out).trim()).unwrap();
    assert_eq!(json["outcome"], "passed", "{json}");
}

/// A test that uses a folder the user made writable, which every test run shares: the run
/// that confirms a pass does not go at the same time as the pass, so the two never meet
/// there, and a right fix passes as it does in a checkout.
#[test]
fn a_shared_writable_folder_keeps_a_pass_and_its_confirmation_apart() {
    let env = TestEnv::new();
    let shared = env.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let test = format!(
        "import os, time, unittest\nfrom calc import add\n\n\n\
         class T(unittest.TestCase):\n    def test_add(self):\n        \
         path = os.path.join({:?}, 'cache')\n        \
         with open(path, 'w') as f:\n            f.write('x')\n        \
         time.sleep(1)\n        \
         os.remove(path)\n        \
         self.assertEqual(add(2, 3), 5)\n",
        shared.display().to_string()
    );
    let repo = env.repo("calc", &[("calc.py", CALC), ("test_calc.py", &test)]);
    let shared_arg = shared.display().to_string();
    let run = env.fix_scripted(
        &repo,
        "agent/shared",
        json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]),
        &["--allow-write", &shared_arg, "--json"],
    );
    let json: Value = serde_json::from_str(stdout(&run.out).trim()).unwrap();
    assert_eq!(json["outcome"], "passed", "{}", run.stderr());
}

/// Overlays go without syncing the filesystem below them (`volatile`): the end of each test
/// run and command otherwise waited for every write still pending on that disk. HOME's overlay
/// is mounted again over the same work dir for each command, which a volatile overlay allows
/// only once its mark is cleared.
#[test]
fn overlays_are_volatile_and_mount_again_over_their_work_dir() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[("calc.py", CALC), ("test_calc.py", UNITTEST_CALC)],
    );
    let log = env.path().join("log");
    std::fs::create_dir(&log).unwrap();
    let options = |dir: &str, to: &str| {
        format!(
            "awk -v d=\"{dir}\" '$5 == d && / - overlay /' /proc/self/mountinfo | head -n 1 \
             >> {}/{to}",
            log.display()
        )
    };
    let test = format!("{}; python3 -m unittest -v", options("$PWD", "tree"));
    // A folder of the user's, and a command that tries to put a link to it in place of HOME's
    // overlay work dir, whose contents the kernel clears at the next mount.
    let victim = env.path().join("victim");
    std::fs::create_dir_all(victim.join("work/incompat/volatile")).unwrap();
    std::fs::write(victim.join("work/kept.txt"), "the user's\n").unwrap();
    let plant = format!(
        "w=$(awk -v d=\"$HOME\" '$5 == d && / - overlay /' /proc/self/mountinfo | head -n 1 \
         | sed 's/.*workdir=\\([^,]*\\).*/\\1/'); \
         (mv \"$w\" \"$w.old\" && ln -s {} \"$w\") 2>/dev/null; echo kept > \"$HOME/.agent-note\"",
        victim.display()
    );
    let home = |id: &str, then: &str| {
        let command = format!("{}; {then}", options("$HOME", "home"));
        tool(id, "run_command", json!({"command": command}))
    };
    let log_note = format!("cat \"$HOME/.agent-note\" >> {}/note", log.display());
    let log_arg = log.display().to_string();
    let run = env.fix_scripted(
        &repo,
        "agent/volatile",
        json!([
            calls("Look.", vec![home("h1", &plant)]),
            calls("Again.", vec![home("h2", &log_note)]),
            calls("Fix.", vec![fix_add()]),
            end_turn("Done.")
        ]),
        &["--test-cmd", &test, "--allow-write", &log_arg, "--json"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let lines = |name: &str| -> Vec<String> {
        std::fs::read_to_string(log.join(name))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    };
    let (tree, home) = (lines("tree"), lines("home"));
    // Before any change and after the fix; both commands, the second over the first's work dir.
    assert_eq!(tree.len(), 2, "{tree:?}");
    assert_eq!(home.len(), 2, "{home:?}\n{}", run.stderr());
    for line in tree.iter().chain(&home) {
        assert!(line.contains("volatile"), "{line}");
    }
    // HOME's writes last from one command to the next, and the user's folder is untouched.
    assert_eq!(lines("note"), vec!["kept"], "{:?}", run.results());
    assert!(
        victim.join("work/kept.txt").exists(),
        "the kernel cleared the user's folder"
    );
}
