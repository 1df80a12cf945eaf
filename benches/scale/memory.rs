//! Peak memory of a whole run (set-up, a test run before any change, one edit and its commit,
//! the test run that ends it, the report) beside `git worktree add` of the same repository,
//! and what libgit2's own checkout of the same tree takes in a process that does nothing else
//! (every run checks the tree out once, into the clean room).

/// The argument that makes this binary check `REPO`'s HEAD out into `DIR` and exit.
const CHECKOUT_ONLY: &str = "--libgit2-checkout-only";

use crate::common::{git_command, Options, Repo};
use std::os::unix::process::ExitStatusExt;
use std::process::Command;

/// The argument that makes this binary run `PROGRAM ARGS...` and print its peak in KiB.
const PEAK_OF: &str = "--peak-of";

/// After `PEAK_OF`: `STDOUT_TO FILE` writes PROGRAM's stdout to FILE.
const STDOUT_TO: &str = "--stdout-to";

/// The peak resident memory, in KiB, of `command` (and of what it waited for), run to its end.
/// Measured from a small process of this binary's: a process that a large one spawns starts
/// its count at what the large one held (Linux counts the address space it leaves at exec),
/// and this bench holds tens of MiB once its other sections have run.
fn peak_kib(command: Command) -> i64 {
    launch(command, None)
}

/// `peak_kib`, with what `command` prints on stdout written to `out`.
pub fn peak_kib_to(command: Command, out: &std::path::Path) -> i64 {
    launch(command, Some(out))
}

fn launch(command: Command, out: Option<&std::path::Path>) -> i64 {
    let mut launcher = Command::new(std::env::current_exe().expect("this bench"));
    launcher.arg(PEAK_OF);
    if let Some(out) = out {
        launcher.arg(STDOUT_TO).arg(out);
    }
    launcher.arg(command.get_program()).args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => launcher.env(key, value),
            None => launcher.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        launcher.current_dir(dir);
    }
    let out = launcher.output().expect("launcher");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a peak in KiB")
}

/// With `PEAK_OF [STDOUT_TO FILE] PROGRAM ARGS...` as its arguments, runs PROGRAM, prints
/// its peak resident memory in KiB and says with what exit code to end; otherwise `None`.
/// PROGRAM's stderr is dropped.
pub fn peak_of() -> Option<i32> {
    let mut args = std::env::args_os().skip(1).peekable();
    if args.next()? != PEAK_OF {
        return None;
    }
    let stdout = match args.peek() {
        Some(arg) if arg == STDOUT_TO => {
            args.next();
            let file = std::fs::File::create(args.next()?).expect("stdout file");
            std::process::Stdio::from(file)
        }
        _ => std::process::Stdio::null(),
    };
    let mut command = Command::new(args.next()?);
    command.args(args).stdout(stdout);
    println!("{}", run_to_end(command));
    Some(0)
}

/// The peak resident memory, in KiB, of `command` (and what it waited for), run here.
// wait4 reaps the child: std's own wait cannot say how much memory it took.
#[allow(clippy::zombie_processes)]
fn run_to_end(mut command: Command) -> i64 {
    let child = command
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let pid = i32::try_from(child.id()).expect("pid");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 writes only into `status` and `usage`, which outlive the call.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4");
    let status = std::process::ExitStatus::from_raw(status);
    assert!(status.code().is_some(), "killed: {status:?}");
    usage.ru_maxrss
}

pub fn section(repo: &Repo, options: &Options) {
    let home = tempfile::tempdir().expect("home");
    let script = home.path().join("script.json");
    std::fs::write(
        &script,
        r##"[
  {"stop_reason": "tool_use", "content": [
    {"type": "tool_use", "id": "t1", "name": "edit_file",
     "input": {"path": "calc.py", "old_text": "return a + b", "new_text": "return b + a"}}]},
  {"stop_reason": "end_turn", "content": [{"type": "text", "text": "Done."}]}
]"##,
    )
    .expect("script");
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    let runs = options.runs.clamp(1, 3);
    for n in 0..runs {
        let mut fix = Command::new(env!("CARGO_BIN_EXE_agent-git"));
        fix.args(["fix", "swap the operands", "--repo"])
            .arg(&repo.path)
            .arg("--model")
            .arg(format!("script:{}", script.display()))
            .args(["--test-cmd", "python3 -m unittest -q test_calc"])
            .args(["--branch", &format!("bench/memory-{n}"), "--json"])
            .env("HOME", home.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1");
        ours.push(peak_kib(fix));
        let tree = home.path().join(format!("floor-{n}"));
        let spec = tree.display().to_string();
        theirs.push(peak_kib(git_command(
            &repo.path,
            &["worktree", "add", "-q", "--detach", &spec, "main"],
        )));
        let removed = git_command(&repo.path, &["worktree", "remove", "--force", &spec])
            .status()
            .expect("git");
        assert!(removed.success());
    }
    let mut bare = Vec::new();
    for n in 0..runs {
        let target = home.path().join(format!("libgit2-{n}"));
        let mut only = Command::new(std::env::current_exe().expect("this bench"));
        only.arg(CHECKOUT_ONLY).arg(&repo.path).arg(&target);
        bare.push(peak_kib(only));
        std::fs::remove_dir_all(&target).expect("remove");
    }
    let bare = median(bare);
    let (ours, theirs) = (median(ours), median(theirs));
    let ratio = ours as f64 / theirs.max(1) as f64;
    let verdict = if ratio <= 1.5 { "ok" } else { "OVER" };
    println!(
        "  {:<40} {:>8.1} MiB            {:<34} {:>8.1} MiB            {ratio:>5.2}x (target 1.5x) {verdict}",
        "peak memory of a whole run",
        ours as f64 / 1024.0,
        "git worktree add",
        theirs as f64 / 1024.0,
    );
    println!(
        "  {:<40} {:>8.1} MiB            {:<34} {:>8.1} MiB            {:>5.2}x",
        "libgit2 checkout_tree alone",
        bare as f64 / 1024.0,
        "git worktree add",
        theirs as f64 / 1024.0,
        bare as f64 / theirs.max(1) as f64,
    );
}

/// With `CHECKOUT_ONLY REPO DIR` as its arguments, checks out REPO's HEAD into DIR with
/// libgit2 as the clean room does (with the memory policy of the process) and says with
/// what exit code to end; otherwise `None`.
pub fn checkout_only() -> Option<i32> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != CHECKOUT_ONLY {
        return None;
    }
    let (source, target) = (args.next()?, args.next()?);
    agent_git::memory::tune();
    let tree = {
        let source = git2::Repository::open(&source).expect("open");
        let head = source.head().and_then(|h| h.peel_to_tree()).expect("tree");
        head.id()
    };
    // As the clean room is made: a repository of its own that reads the objects through
    // alternates, an empty index, and a work tree beside it.
    let target = std::path::PathBuf::from(target);
    let git = target.join("git");
    let work = target.join("tree");
    std::fs::create_dir_all(&work).expect("mkdir");
    drop(git2::Repository::init_bare(&git).expect("init"));
    let objects = std::path::Path::new(&source).join(".git/objects");
    std::fs::write(
        git.join("objects/info/alternates"),
        format!("{}\n", objects.display()),
    )
    .expect("alternates");
    let repo = git2::Repository::open_bare(&git).expect("open");
    repo.set_workdir(&work, false).expect("workdir");
    repo.index().and_then(|mut i| i.write()).expect("index");
    let tree = repo.find_tree(tree).expect("tree");
    let mut checkout = git2::build::CheckoutBuilder::new();
    checkout.force().update_index(false);
    repo.checkout_tree(tree.as_object(), Some(&mut checkout))
        .expect("checkout");
    Some(0)
}

fn median(mut values: Vec<i64>) -> i64 {
    values.sort();
    values[values.len() / 2]
}
