//! The sandbox helper's own work, run in the short-lived, single-threaded process that
//! `agent-git sandbox-exec` starts: confine itself, then run the command as init of a new PID
//! namespace and pass its exit status on. Syscalls live here and nowhere else.

use landlock::{
    path_beneath_rules, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
    ABI,
};
use rustix::process::Resource;
use rustix::thread::{unshare_unsafe, UnshareFlags};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The exit status of a helper that could not confine a command (so did not run it).
pub const SANDBOX_FAILED: i32 = 125;

/// Everything the helper enforces, as one value: `sandbox::policy` builds it with named
/// fields, agent-git writes it whole (JSON) for the helper, which reads it back whole, so no
/// restriction can be added on one side of the process boundary and lost on the other. Only
/// the command and whether to probe come on the helper's command line.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// The only directories the command may write to.
    #[serde(with = "raw_paths")]
    pub writable: Vec<PathBuf>,
    /// Paths the command may not read.
    #[serde(with = "raw_paths")]
    pub hidden: Vec<PathBuf>,
    /// Paths inside the `hidden` ones that the command may read all the same (a venv, say).
    #[serde(with = "raw_paths")]
    pub shown: Vec<PathBuf>,
    /// Paths inside the writable ones that stay read-only (the tests, in the clean room).
    #[serde(with = "raw_paths")]
    pub read_only: Vec<PathBuf>,
    /// Paths the command must still find where the namespace puts something new in their
    /// place (toolchains under /tmp, the runner's script): bound back, read-only.
    #[serde(with = "raw_paths")]
    pub keep: Vec<PathBuf>,
    /// HOME as it is, read-only, under an overlay whose writes go to this directory.
    pub home: Option<HomeOverlay>,
    /// The clean room's tree under an overlay for one test run, if it can be had.
    pub tree: Option<TreeOverlay>,
    /// A mount namespace of its own: the rest of the filesystem read-only, /tmp, /run and
    /// /dev/shm private and empty, hidden paths covered.
    pub read_only_rest: bool,
    /// A /proc of the command's own PID namespace.
    pub fresh_proc: bool,
    /// The most processes the command may have at once: the cgroup's `pids.max`, else that
    /// many more than the user already runs (RLIMIT_NPROC).
    pub max_processes: u64,
    /// The largest file the command may write, in bytes (RLIMIT_FSIZE).
    pub max_file_size: u64,
    /// CPU seconds each process may use (RLIMIT_CPU); the hard limit is 5 seconds more.
    pub max_cpu: u64,
    /// Seconds after which the helper dies, and the command with it, whatever agent-git does.
    pub max_wall: Option<u64>,
    /// A network namespace of its own, with only its own loopback; the command is not run
    /// when it cannot be had.
    pub network: bool,
    /// Writes only in `writable` and `hidden` unreadable, by Landlock; the command is not run
    /// when it cannot be had.
    pub landlock: bool,
    /// Report which layers hold, then exit without running anything (from the command line).
    #[serde(skip)]
    pub probe: bool,
    /// What to run (from the command line).
    #[serde(skip)]
    pub command: Vec<OsString>,
}

/// HOME seen through an overlay: the real one below, read-only; writes land in `upper`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HomeOverlay {
    /// The real HOME: what the overlay shows, read-only, and where it is mounted.
    #[serde(with = "raw_path")]
    pub home: PathBuf,
    /// The directory that takes the overlay's writes (its `upper` and `work` dirs are made in
    /// it).
    #[serde(with = "raw_path")]
    pub upper: PathBuf,
}

/// A test run's view of the clean room's tree: the tree below, untouched; whatever the run
/// writes there, changes or removes lands in `upper`, which the command cannot reach and which
/// is thrown away after. Unlike the HOME overlay it is not a layer that must hold: where it
/// cannot be mounted, the run writes to the tree itself, and the harness undoes that.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeOverlay {
    /// The clean room's tree: what the overlay shows, and where it is mounted.
    #[serde(with = "raw_path")]
    pub tree: PathBuf,
    /// The directory that takes the test run's writes (its `upper` and `work` dirs are made
    /// in it), thrown away after.
    #[serde(with = "raw_path")]
    pub upper: PathBuf,
}

/// A path as the bytes it is: serde's own `PathBuf` refuses one that is not UTF-8, which a
/// work tree under a folder named in Latin-1 is.
mod raw_path {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::path::PathBuf;

    pub fn serialize<S: Serializer>(path: &std::path::Path, to: S) -> Result<S::Ok, S::Error> {
        path.as_os_str().as_bytes().serialize(to)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<PathBuf, D::Error> {
        Vec::<u8>::deserialize(from).map(|bytes| PathBuf::from(std::ffi::OsString::from_vec(bytes)))
    }
}

/// Paths as the bytes they are (`raw_path`).
mod raw_paths {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::path::PathBuf;

    pub fn serialize<S: Serializer>(paths: &[PathBuf], to: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<&[u8]> = paths.iter().map(|p| p.as_os_str().as_bytes()).collect();
        bytes.serialize(to)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<Vec<PathBuf>, D::Error> {
        let all = Vec::<Vec<u8>>::deserialize(from)?;
        Ok(all
            .into_iter()
            .map(|bytes| PathBuf::from(std::ffi::OsString::from_vec(bytes)))
            .collect())
    }
}

/// What the helper writes into a tree overlay's `upper` once the overlay is mounted: only then
/// did the run leave the tree as it was.
pub const OVERLAY_HELD: &str = "held";

/// The folder of an overlay's folder that holds what was written through it: its upper dir.
pub const OVERLAY_UPPER: &str = "upper";

/// Directories the command gets fresh and empty, and whether it may write there.
pub(super) const PRIVATE_DIRS: &[(&str, bool)] = &[
    ("/tmp", true),
    ("/var/tmp", true),
    ("/dev/shm", true),
    ("/run", false),
    ("/var/run", false),
];

/// The probe's lines: how each layer came out, as `parse_probe` reads them back.
fn print_probe(layers: &super::Layers) {
    let show = |r: &Result<(), String>| match r {
        Ok(()) => "ok ".to_string(),
        Err(e) => format!("error {e}"),
    };
    println!("network {}", show(&layers.network));
    println!("filesystem {}", show(&layers.filesystem));
    println!("readonly {}", show(&layers.read_only));
    println!("home {}", show(&layers.home));
    println!("proc {}", show(&layers.proc));
    match &layers.processes {
        Ok(how) => println!("processes ok {how}"),
        Err(e) => println!("processes error {e}"),
    }
}

/// Confines this process, then runs the command as init of a new PID namespace and passes its
/// exit status on. The helper itself stays outside that namespace, as the command's parent:
/// when agent-git dies the helper gets a parent-death signal, and when the helper dies, so
/// does the init, and with it every process of the namespace.
pub fn run(args: &Policy) -> i32 {
    let parent = rustix::process::getppid();
    // The cgroup is joined first, with the ids agent-git runs as, before a user namespace.
    let processes = limit_processes(args.max_processes);
    let wants_namespaces = args.network || args.read_only_rest;
    let user = if wants_namespaces {
        own_user_namespace()
    } else {
        Err("not requested".into())
    };
    let network = match (&user, args.network) {
        (_, false) => Err("not requested".into()),
        (Err(e), true) => Err(e.clone()),
        (Ok(()), true) => isolate_network(),
    };
    let limits = set_rlimits(args);
    let failed = |wanted: bool, result: &Result<(), String>| match (wanted, result) {
        (true, Err(e)) if !args.probe => {
            eprintln!("agent-git sandbox: {e}; the command was not run");
            true
        }
        _ => false,
    };
    if failed(args.network, &network) || failed(true, &limits) {
        return SANDBOX_FAILED;
    }
    // SAFETY: this process is single-threaded and unshares no file table.
    let pid_namespace = unsafe { unshare_unsafe(UnshareFlags::NEWPID) }
        .map_err(|e| format!("cannot create a PID namespace: {e}"));
    // Without one the command still runs (killed as a process group, and by its cgroup), but
    // a /proc of its own cannot be had.
    if failed(args.fresh_proc, &pid_namespace) {
        return SANDBOX_FAILED;
    }
    let Ok(parent_alive) = die_with(parent) else {
        return SANDBOX_FAILED;
    };
    // SAFETY: single-threaded, so the child may allocate; it only returns by exec or _exit.
    match unsafe { libc::fork() } {
        -1 => {
            eprintln!(
                "agent-git sandbox: cannot fork: {}",
                std::io::Error::last_os_error()
            );
            SANDBOX_FAILED
        }
        0 => {
            // Only the helper may hold the writing end, or its death would go unseen.
            let ParentAlive { reader, writer } = parent_alive;
            drop(writer);
            let namespaces = Namespaces {
                user,
                pid: pid_namespace,
                network,
            };
            let code = namespace_init(args, namespaces, processes, &reader);
            // SAFETY: _exit ends the child without running the parent's destructors twice.
            unsafe { libc::_exit(code) }
        }
        child => {
            // The writing end stays open for as long as this helper lives.
            let ParentAlive { reader, writer } = parent_alive;
            drop(reader);
            let code = wait_for(child, args.max_wall);
            drop(writer);
            code
        }
    }
}

/// Reads the probe's lines back into layers.
pub fn parse_probe(text: &str) -> super::Layers {
    let field = |name: &str| -> Result<String, String> {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
            .ok_or_else(|| format!("the sandbox helper did not report on {name}"))?;
        match line.split_once(' ').unwrap_or((line, "")) {
            ("ok", how) => Ok(how.trim().to_string()),
            (_, why) => Err(why.trim().to_string()),
        }
    };
    super::Layers {
        network: field("network").map(|_| ()),
        filesystem: field("filesystem").map(|_| ()),
        read_only: field("readonly").map(|_| ()),
        home: field("home").map(|_| ()),
        proc: field("proc").map(|_| ()),
        processes: field("processes"),
    }
}

/// The ends of a pipe that tells a child its parent is gone: the parent holds `writer` open
/// for its whole life, and the child, holding only `reader`, sees end-of-file when it dies.
struct ParentAlive {
    reader: std::os::fd::OwnedFd,
    writer: std::os::fd::OwnedFd,
}

/// Asks for SIGKILL when the parent (agent-git) dies, and makes sure it has not already: a
/// namespace change may clear the request, so it is made once they are all made.
fn die_with(parent: Option<rustix::process::Pid>) -> Result<ParentAlive, ()> {
    let (reader, writer) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| eprintln!("agent-git sandbox: cannot make a pipe: {e}"))?;
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    if rustix::process::getppid() != parent {
        return Err(());
    }
    Ok(ParentAlive { reader, writer })
}

/// Waits for the namespace's init; at `max_wall` seconds the default action of SIGALRM ends
/// this helper, and the init's parent-death signal ends everything in the namespace.
fn wait_for(child: libc::pid_t, max_wall: Option<u64>) -> i32 {
    if let Some(seconds) = max_wall {
        let seconds = u32::try_from(seconds.max(1)).unwrap_or(u32::MAX);
        // SAFETY: alarm(2) only arms a timer.
        unsafe { libc::alarm(seconds) };
    }
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: waitpid writes the status into the int we own.
        let waited = unsafe { libc::waitpid(child, &mut status, 0) };
        if waited == child {
            break;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            eprintln!("agent-git sandbox: lost the command");
            return SANDBOX_FAILED;
        }
    }
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    }
}

/// How the namespaces the helper made came out.
struct Namespaces {
    user: Result<(), String>,
    pid: Result<(), String>,
    network: Result<(), String>,
}

/// In the child, pid 1 of the new namespace: its own mounts and /proc, Landlock, no
/// capabilities, then the command. Returns only on failure, or after a probe.
fn namespace_init(
    args: &Policy,
    namespaces: Namespaces,
    processes: Result<String, String>,
    parent_alive: &std::os::fd::OwnedFd,
) -> i32 {
    if !tied_to_parent(parent_alive) {
        return SANDBOX_FAILED;
    }
    // Hidden paths where they really are too: computed once, for the mounts and Landlock.
    let hidden = with_targets(&args.hidden);
    let not_requested = || Err::<(), String>("not requested".into());
    let (read_only, home, extra_writable) = match (&namespaces.user, args.read_only_rest) {
        (_, false) => (not_requested(), not_requested(), Vec::new()),
        (Err(e), true) => (Err(e.clone()), Err(e.clone()), Vec::new()),
        (Ok(()), true) => match build_mounts(args, &hidden) {
            Ok((home, extra)) => (Ok(()), home, extra),
            Err(e) => (Err(e.clone()), Err(e), Vec::new()),
        },
    };
    let proc = match (
        read_only.as_ref().and(namespaces.pid.as_ref()),
        args.fresh_proc,
    ) {
        (_, false) => not_requested(),
        (Err(e), true) => Err(e.clone()),
        (Ok(()), true) => mount_fresh_proc(),
    };
    let filesystem = if args.landlock {
        let mut writable = args.writable.clone();
        writable.extend(extra_writable);
        confine_files(&writable, &hidden, &args.shown)
    } else {
        not_requested()
    };
    if args.probe {
        print_probe(&super::Layers {
            network: namespaces.network,
            filesystem,
            read_only,
            home,
            proc,
            processes,
        });
        use std::io::Write;
        let _ = std::io::stdout().flush();
        return 0;
    }
    let wanted = [
        (args.read_only_rest, read_only),
        (args.home.is_some(), home),
        (args.fresh_proc, proc),
        (args.landlock, filesystem),
    ];
    for (wanted, result) in wanted {
        if let (true, Err(e)) = (wanted, result) {
            eprintln!("agent-git sandbox: {e}; the command was not run");
            return SANDBOX_FAILED;
        }
    }
    drop_capabilities();
    if !tied_to_parent(parent_alive) {
        return SANDBOX_FAILED;
    }
    exec(&args.command)
}

/// Asks (again: a change of credentials may clear it) for SIGKILL when the helper dies, and
/// says whether it is still alive, so that its death cannot slip in before the request.
fn tied_to_parent(reader: &std::os::fd::OwnedFd) -> bool {
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    parent_is_alive(reader)
}

/// Whether the helper still holds its end of the pipe.
fn parent_is_alive(reader: &std::os::fd::OwnedFd) -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::new(reader, PollFlags::IN)];
    match poll(&mut fds, Some(&Timespec::default())) {
        Ok(0) => true,
        _ => !fds[0].revents().intersects(PollFlags::HUP | PollFlags::IN),
    }
}

fn exec(command: &[OsString]) -> i32 {
    use std::os::unix::process::CommandExt;
    let Some((program, rest)) = command.split_first() else {
        eprintln!("agent-git sandbox: no command given");
        return SANDBOX_FAILED;
    };
    let e = std::process::Command::new(program).args(rest).exec();
    eprintln!(
        "agent-git sandbox: cannot run {}: {e}",
        program.to_string_lossy()
    );
    SANDBOX_FAILED
}

/// A user namespace of this process's own, for root too where the kernel allows: then it
/// may make the other namespaces, and nothing it does there reaches the host. Root without
/// one still can.
fn own_user_namespace() -> Result<(), String> {
    let uid = rustix::process::geteuid();
    let gid = rustix::process::getegid();
    // SAFETY: this process is single-threaded and unshares no file table.
    match unsafe { unshare_unsafe(UnshareFlags::NEWUSER) } {
        Ok(()) => map_own_ids(uid.as_raw(), gid.as_raw()),
        Err(_) if uid.is_root() => Ok(()),
        Err(e) => Err(format!("cannot create a user namespace: {e}")),
    }
}

/// A fresh network namespace with only its own loopback, brought up so that servers the
/// command starts for itself can be reached. Also a private IPC namespace and a fresh session
/// keyring: then SysV IPC objects and keys cannot carry state from one command to the next,
/// or outlive the run.
fn isolate_network() -> Result<(), String> {
    // SAFETY: this process is single-threaded and unshares no file table.
    unsafe { unshare_unsafe(UnshareFlags::NEWNET | UnshareFlags::NEWIPC) }
        .map_err(|e| format!("cannot create a network namespace: {e}"))?;
    join_fresh_keyring();
    loopback_up()
}

/// Leaves the keyrings agent-git was started with for a new, empty session keyring.
fn join_fresh_keyring() {
    const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;
    // SAFETY: keyctl(JOIN_SESSION_KEYRING, NULL) reads no memory of ours; a kernel without
    // keyrings answers ENOSYS, which leaves nothing to isolate.
    unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_JOIN_SESSION_KEYRING,
            std::ptr::null::<libc::c_char>(),
        );
    }
}

/// Maps this process's own ids in the user namespace it just entered, so files keep their
/// owner.
fn map_own_ids(uid: u32, gid: u32) -> Result<(), String> {
    let write =
        |path: &str, text: String| std::fs::write(path, text).map_err(|e| format!("{path}: {e}"));
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))
}

/// In a mount namespace of this process's own: /tmp, /run and /dev/shm fresh and empty (no
/// socket or file of the host left there), HOME under an overlay if asked, hidden paths
/// covered by empty ones, and everything read-only but `writable`, with the `read_only` paths
/// inside those read-only again: `chmod`, `chown` or `touch` of anything else fails with
/// EROFS (Landlock does not cover them), and a test run cannot rewrite the tests it runs.
/// What the command must still see under a new mount is bound back. Nothing here is seen
/// outside: the namespace's mounts are private. `hidden` are the paths to cover, links
/// resolved. Returns how the HOME overlay went, and the
/// fresh directories the command may write to.
fn build_mounts(
    args: &Policy,
    hidden: &[PathBuf],
) -> Result<(Result<(), String>, Vec<PathBuf>), String> {
    use rustix::mount::{mount_bind, mount_bind_recursive, mount_change, MountPropagationFlags};
    // SAFETY: this process is single-threaded and unshares no file table.
    unsafe { unshare_unsafe(UnshareFlags::NEWNS) }
        .map_err(|e| format!("cannot create a mount namespace: {e}"))?;
    let root = Path::new("/");
    mount_change(
        root,
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )
    .map_err(|e| fail("make private", root, e))?;
    let visible: Vec<PathBuf> = args
        .writable
        .iter()
        .chain(&args.shown)
        .chain(&args.keep)
        .chain(args.home.iter().flat_map(|h| [&h.home, &h.upper]))
        .cloned()
        .collect();
    // HOME's overlay keeps its folders beside the private HOME, where nothing made them yet:
    // made before the temp dirs are covered, they are bound back with the rest.
    for made in args
        .home
        .iter()
        .flat_map(|h| [h.upper.join("upper"), h.upper.join("work")])
    {
        std::fs::create_dir_all(&made)
            .map_err(|e| format!("cannot make {}: {e}", made.display()))?;
    }
    // The tree overlay's upper dir is seen only until the overlay is mounted: the hidden
    // folders it lies in are covered after, and nothing binds it back.
    let mut visible_for_now = visible.clone();
    visible_for_now.extend(args.tree.iter().map(|t| t.upper.clone()));
    let mut fresh_writable = Vec::new();
    for (dir, writable) in PRIVATE_DIRS {
        let dir = Path::new(dir);
        let is_dir = std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir());
        // One the user made writable on purpose (`--allow-write /tmp`) stays as it is.
        if !is_dir || args.writable.iter().any(|w| dir.starts_with(w)) {
            continue;
        }
        cover(dir, &visible_for_now, || {
            mount_tmpfs(dir, if *writable { "1777" } else { "755" })
        })?;
        if *writable {
            fresh_writable.push(dir.to_path_buf());
        }
    }
    fresh_ptys()?;
    let home = match &args.home {
        None => Err("not requested".to_string()),
        Some(overlay) => {
            // Only what must be written for real is bound back over it: a toolchain under
            // HOME is seen through the overlay, and its writes land there too.
            let writable = writable_but(args, &overlay.home);
            let mounted = cover(&overlay.home, &writable, || mount_home_overlay(overlay));
            if mounted.is_ok() {
                fresh_writable.push(overlay.home.clone());
            }
            mounted
        }
    };
    if let Some(overlay) = &args.tree {
        // Directories the user made writable inside the tree stay the real ones.
        let inside = writable_but(args, &overlay.tree);
        // Not a layer that must hold: without it, the harness undoes what the run changed.
        // Nor is the note that says it held: without it, the same. A folder of the real tree
        // bound back inside it could be written for real, so then there is no note either.
        let mounted = cover(&overlay.tree, &inside, || mount_tree_overlay(overlay));
        let inside_tree = inside.iter().any(|w| w.starts_with(&overlay.tree));
        if mounted.is_ok() && !inside_tree {
            let _ = std::fs::File::create(overlay.upper.join(OVERLAY_HELD));
        }
    }
    for path in hidden {
        let covered = match std::fs::symlink_metadata(path) {
            // What it leads to is in the list too, and covered there.
            Ok(meta) if meta.is_symlink() => Ok(()),
            Ok(meta) if meta.is_dir() => cover(path, &visible, || mount_tmpfs(path, "700")),
            Ok(_) => mount_bind(Path::new("/dev/null"), path).map_err(|e| fail("hide", path, e)),
            Err(_) => Ok(()),
        };
        // Another run's folder may go between the look and the mount (a test run's lasts a
        // fraction of a second): what is gone hides nothing. Anything still there that
        // cannot be covered stops the command.
        let gone = || {
            std::fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        };
        if covered.is_err() && !gone() {
            covered?;
        }
    }
    for dir in args.writable.iter().filter(|d| d.exists()) {
        mount_bind_recursive(dir, dir).map_err(|e| fail("bind", dir, e))?;
    }
    // The directories above a read-only path become mount points too: a mount point cannot
    // be renamed or removed, so the read-only path cannot be moved aside and replaced.
    let holders = holders_of(&args.read_only, &args.writable);
    for dir in &holders {
        mount_bind(dir, dir).map_err(|e| fail("bind", dir, e))?;
    }
    for path in args.read_only.iter().filter(|p| p.exists()) {
        mount_bind(path, path).map_err(|e| fail("bind", path, e))?;
    }
    set_read_only(root, true, true)?;
    let writable = args.writable.iter().filter(|d| d.exists());
    for dir in writable.chain(&holders).chain(&fresh_writable) {
        set_read_only(dir, false, false)?;
    }
    // The working directory still points into the mounts as they were: look it up again, so
    // relative paths reach what is mounted there now.
    let cwd = std::env::current_dir().map_err(|e| format!("cannot find the working dir: {e}"))?;
    std::env::set_current_dir(&cwd)
        .map_err(|e| format!("cannot enter {} again: {e}", cwd.display()))?;
    Ok((home, fresh_writable))
}

/// The writable directories but `dir`: what an overlay on `dir` binds back inside it.
fn writable_but(args: &Policy, dir: &Path) -> Vec<PathBuf> {
    args.writable
        .iter()
        .filter(|w| *w != dir)
        .cloned()
        .collect()
}

/// `paths` and, for each that is or goes through a link, where it really is: a `~/.ssh` that
/// links into a dotfiles folder is hidden there too.
fn with_targets(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut all = paths.to_vec();
    for path in paths {
        if let Ok(real) = path.canonicalize() {
            if !all.contains(&real) {
                all.push(real);
            }
        }
    }
    all
}

fn fail(what: &str, path: &Path, e: rustix::io::Errno) -> String {
    format!("cannot {what} {}: {e}", path.display())
}

/// Mounts something new at `target`, then binds back what the command must still see of
/// the old (the `visible` paths under it, read through descriptors opened before).
fn cover(
    target: &Path,
    visible: &[PathBuf],
    mount: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    use rustix::fs::{Mode, OFlags};
    let mut inside: Vec<&PathBuf> = visible
        .iter()
        .filter(|v| v.starts_with(target) && v.as_path() != target)
        .collect();
    inside.sort();
    inside.dedup_by(|later, earlier| later.starts_with(earlier.as_path()));
    let mut held = Vec::new();
    for path in inside {
        // One that is not there has nothing to bind back.
        if let Ok(fd) = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()) {
            held.push((path, fd));
        }
    }
    mount()?;
    for (path, fd) in held {
        let is_dir = rustix::fs::fstat(&fd)
            .map(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir())
            .unwrap_or(false);
        let made = if is_dir {
            std::fs::create_dir_all(path)
        } else {
            path.parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::File::create(path).map(drop))
        };
        made.map_err(|e| format!("cannot make a place for {}: {e}", path.display()))?;
        use std::os::fd::AsRawFd;
        let source = format!("/proc/self/fd/{}", fd.as_raw_fd());
        rustix::mount::mount_bind_recursive(source.as_str(), path)
            .map_err(|e| fail("bind back", path, e))?;
    }
    Ok(())
}

fn mount_tmpfs(dir: &Path, mode: &str) -> Result<(), String> {
    use rustix::mount::{mount, MountFlags};
    let options = std::ffi::CString::new(format!("mode={mode}"))
        .map_err(|_| "a mode holds a NUL byte".to_string())?;
    mount(
        "tmpfs",
        dir,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        Some(options.as_c_str()),
    )
    .map_err(|e| fail("mount a private dir on", dir, e))
}

/// A devpts of the namespace's own, so that no terminal of the host (another session's
/// shell, with what is typed there) can be opened; where none can be mounted, an empty
/// /dev/pts, which leaves the command without terminals rather than with the host's.
fn fresh_ptys() -> Result<(), String> {
    use rustix::mount::{mount, mount_bind, MountFlags};
    let pts = Path::new("/dev/pts");
    if !pts.is_dir() {
        return Ok(());
    }
    let options = c"newinstance,ptmxmode=0666,mode=0620";
    let own = mount(
        "devpts",
        pts,
        "devpts",
        MountFlags::NOSUID | MountFlags::NOEXEC,
        Some(options),
    );
    if own.is_err() {
        return mount_tmpfs(pts, "755");
    }
    let ptmx = Path::new("/dev/ptmx");
    if ptmx.exists() {
        mount_bind(pts.join("ptmx"), ptmx).map_err(|e| fail("bind", ptmx, e))?;
    }
    Ok(())
}

/// HOME as it is below, read-only; what the command writes there lands in `upper`.
fn mount_home_overlay(overlay: &HomeOverlay) -> Result<(), String> {
    mount_overlay("HOME", &overlay.home, &overlay.upper)
}

/// The clean room's tree as it is below, untouched; what the command writes there lands in
/// `upper`.
fn mount_tree_overlay(overlay: &TreeOverlay) -> Result<(), String> {
    mount_overlay("the tree", &overlay.tree, &overlay.upper)
}

/// An overlay on `dir` with `dir` itself below: what is written there lands in `upper`.
fn mount_overlay(what: &str, dir: &Path, upper: &Path) -> Result<(), String> {
    use rustix::mount::{mount, MountFlags};
    let work = upper.join("work");
    let upper = upper.join(OVERLAY_UPPER);
    for made in [&upper, &work] {
        std::fs::create_dir_all(made)
            .map_err(|e| format!("cannot make {}: {e}", made.display()))?;
    }
    // The option string separates with commas and colons: a path holding one cannot be said.
    let paths = [dir, &upper, &work].map(|p| p.display().to_string());
    if paths.iter().any(|p| p.contains([',', ':', '\\'])) {
        return Err(format!(
            "{what} {} cannot be named to an overlay (a comma, colon or backslash)",
            dir.display()
        ));
    }
    // A volatile overlay leaves this mark in its work dir, and refuses to be mounted again
    // over a work dir that holds it; a failed attempt may leave it too. Nothing of an upper
    // needs to outlive a crash (HOME's lasts one run, a tree's one test run), and no command
    // can reach these folders (HOME's are beside its private HOME, a tree's in the room).
    let mark = work.join("work/incompat/volatile");
    let clear_mark = || match std::fs::remove_dir_all(&mark) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("cannot remove {}: {e}", mark.display()))
        }
        _ => Ok(()),
    };
    let [lower, upper, work] = paths;
    let base = format!("lowerdir={lower},upperdir={upper},workdir={work}");
    // Unprivileged overlays keep their own records in user.* attributes. A volatile one
    // does not sync the filesystem below when it goes: without it, the end of every test
    // run (and of the sandbox's probe) waited for all the disk writes still pending there,
    // such as a checkout's 10,000 files (0.1-0.2 s each time).
    let mut last = None;
    let tried = [
        format!("{base},userxattr,volatile"),
        format!("{base},userxattr"),
        format!("{base},volatile"),
        base,
    ];
    for options in tried {
        clear_mark()?;
        let options =
            std::ffi::CString::new(options).map_err(|_| format!("{what} holds a NUL byte"))?;
        match mount(
            "overlay",
            dir,
            "overlay",
            MountFlags::NOSUID | MountFlags::NODEV,
            Some(options.as_c_str()),
        ) {
            Ok(()) => return Ok(()),
            Err(e) => last = Some(e),
        }
    }
    Err(format!(
        "cannot put an overlay on {what} {}: {}",
        dir.display(),
        last.map(|e| e.to_string()).unwrap_or_default()
    ))
}

/// A /proc of this PID namespace, over the host's: no other process's `environ` or
/// `cmdline` can be read.
fn mount_fresh_proc() -> Result<(), String> {
    use rustix::mount::{mount, MountFlags};
    let proc = Path::new("/proc");
    mount(
        "proc",
        proc,
        "proc",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        None,
    )
    .map_err(|e| fail("mount a fresh /proc on", proc, e))
}

/// The directories between a writable directory and each read-only path inside it,
/// shallowest first.
fn holders_of(read_only: &[PathBuf], writable: &[PathBuf]) -> Vec<PathBuf> {
    let mut holders: Vec<PathBuf> = Vec::new();
    for path in read_only.iter().filter(|p| p.exists()) {
        let Some(top) = writable.iter().find(|w| path.starts_with(w)) else {
            continue;
        };
        for dir in path.ancestors().skip(1).take_while(|a| *a != top.as_path()) {
            if !holders.iter().any(|h| h == dir) {
                holders.push(dir.to_path_buf());
            }
        }
    }
    holders.sort_by_key(|h| h.components().count());
    holders
}

/// Sets (or clears) the read-only flag of the mount at `path`, and of every mount below it
/// when `recursive`: one `mount_setattr(2)`, which rustix does not wrap.
fn set_read_only(path: &Path, read_only: bool, recursive: bool) -> Result<(), String> {
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    let attr = MountAttr {
        attr_set: if read_only { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if read_only { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{} holds a NUL byte", path.display()))?;
    // SAFETY: mount_setattr reads `attr` (size given) and the NUL-terminated path; both live
    // across the call.
    let result = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c_path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if result != 0 {
        return Err(format!(
            "cannot make {} {}: {}",
            path.display(),
            if read_only { "read-only" } else { "writable" },
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Sets the UP flag of `lo`: rustix has no interface ioctls, so the ioctls are libc's.
fn loopback_up() -> Result<(), String> {
    use rustix::net::{socket, AddressFamily, SocketType};
    use std::os::fd::AsRawFd;
    let socket = socket(AddressFamily::INET, SocketType::DGRAM, None)
        .map_err(|e| format!("cannot open a socket to bring up loopback: {e}"))?;
    // SAFETY: an all-zero ifreq is a valid value (a C struct of integers and arrays).
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = *byte as libc::c_char;
    }
    let fd = socket.as_raw_fd();
    // SAFETY: SIOCGIFFLAGS fills the flags of the ifreq we own; fd is an open socket.
    let mut result = unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut request) };
    if result == 0 {
        // SAFETY: the ioctl above set ifru_flags, the union member read and written here.
        unsafe { request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
        // SAFETY: SIOCSIFFLAGS only reads the ifreq; fd is an open socket.
        result = unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &request) };
    }
    if result != 0 {
        return Err(format!(
            "cannot bring up loopback: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The pids cgroup a helper joins, so a fork bomb meets a ceiling. Root is not bound by
/// RLIMIT_NPROC, so for root only a cgroup limits processes. Named after the agent-git that
/// started the helper (`owner`) and the helper: another run sweeps only an owner's that is gone.
fn cgroup_dir(owner: u32, helper: u32) -> Vec<(PathBuf, &'static str)> {
    vec![
        (
            PathBuf::from(format!("/sys/fs/cgroup/pids/agent-git/{owner}-{helper}")),
            "cgroup.procs",
        ),
        (
            PathBuf::from(format!("/sys/fs/cgroup/agent-git-{owner}-{helper}")),
            "cgroup.procs",
        ),
    ]
}

fn limit_processes(max: u64) -> Result<String, String> {
    let pid = std::process::id();
    let owner = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get().unsigned_abs());
    for (dir, procs) in cgroup_dir(owner, pid) {
        let joined = std::fs::create_dir_all(&dir)
            .and_then(|_| std::fs::write(dir.join("pids.max"), max.to_string()))
            .and_then(|_| std::fs::write(dir.join(procs), pid.to_string()));
        match joined {
            Ok(()) => return Ok(format!("cgroup pids.max {max}")),
            Err(_) => {
                let _ = std::fs::remove_dir(&dir);
            }
        }
    }
    if !rustix::process::geteuid().is_root() {
        let limit = processes_of_this_user() + max;
        return set_limit(Resource::Nproc, limit, limit)
            .map(|_| format!("RLIMIT_NPROC, {max} more than the user runs"));
    }
    Err("no writable pids cgroup, and RLIMIT_NPROC does not bind root".into())
}

/// Removes the cgroup a finished helper made (the helper cannot: it is gone by then). A
/// killed command's processes may take a moment to be reaped; any still listed are killed.
pub fn remove_cgroup(helper_pid: u32) {
    remove_cgroup_of(std::process::id(), helper_pid);
}

/// Whether a cgroup of that helper was there and is gone now.
pub(crate) fn remove_cgroup_of(owner: u32, helper_pid: u32) -> bool {
    let mut removed = false;
    for (dir, procs) in cgroup_dir(owner, helper_pid) {
        for _ in 0..100 {
            match std::fs::remove_dir(&dir) {
                Ok(()) => {
                    removed = true;
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                Err(_) => {
                    let listed = std::fs::read_to_string(dir.join(procs)).unwrap_or_default();
                    for pid in listed
                        .lines()
                        .filter_map(|l| l.trim().parse::<i32>().ok())
                        .filter_map(rustix::process::Pid::from_raw)
                    {
                        // These processes are ours; one already gone is no error.
                        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
        }
    }
    removed
}

fn processes_of_this_user() -> u64 {
    use std::os::unix::fs::MetadataExt;
    let uid = rustix::process::geteuid().as_raw();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid))
        .count() as u64
}

fn set_limit(resource: Resource, soft: u64, hard: u64) -> Result<(), String> {
    let limit = rustix::process::Rlimit {
        current: Some(soft),
        maximum: Some(hard),
    };
    rustix::process::setrlimit(resource, limit)
        .map_err(|e| format!("cannot set the {resource:?} limit: {e}"))
}

fn set_rlimits(args: &Policy) -> Result<(), String> {
    set_limit(Resource::Fsize, args.max_file_size, args.max_file_size)?;
    set_limit(Resource::Cpu, args.max_cpu, args.max_cpu + 5)?;
    set_limit(Resource::Core, 0, 0)
}

/// Reading and running anything stays allowed but under `hidden` (other than `shown`); writing
/// only in `writable` and a few devices. The repository's git directory (which holds the work
/// tree) is thereby read-only but for the work tree itself.
fn confine_files(
    writable: &[PathBuf],
    hidden: &[PathBuf],
    shown: &[PathBuf],
) -> Result<(), String> {
    let abi = ABI::V5;
    let devices = [
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/random",
        "/dev/urandom",
        "/dev/ptmx",
        "/dev/pts",
    ];
    let readable = super::readable_roots(std::path::Path::new("/"), hidden, shown);
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(readable, AccessFs::from_read(abi))))
        .and_then(|r| r.add_rules(path_beneath_rules(writable, AccessFs::from_all(abi))))
        .and_then(|r| r.add_rules(path_beneath_rules(devices, AccessFs::from_all(abi))))
        .and_then(|r| r.restrict_self())
        .map_err(|e| format!("Landlock: {e}"))?;
    match status.ruleset {
        RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => Ok(()),
        RulesetStatus::NotEnforced => Err("this kernel does not enforce Landlock".into()),
    }
}

/// Gives up every capability, for good: the command runs as a plain user even where agent-git
/// runs as root, so it cannot make a file immutable, set the clock, mount, or read another
/// process's memory. Dropped from the bounding set too, so no exec brings them back. A process
/// that holds none to begin with has nothing to drop.
fn drop_capabilities() {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    for capability in CapabilitySet::all().iter() {
        let _ = rustix::thread::remove_capability_from_bounding_set(capability);
    }
    let _ = rustix::thread::clear_ambient_capability_set();
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    let _ = rustix::thread::set_capabilities(None, none);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_lines_parse_into_layers() {
        let layers = parse_probe("network ok \nfilesystem error Landlock: not supported\nreadonly ok \nhome error cannot put an overlay on HOME /h: EINVAL\nproc ok \nprocesses ok cgroup pids.max 512\n");
        assert_eq!(layers.network, Ok(()));
        assert_eq!(layers.read_only, Ok(()));
        assert_eq!(layers.proc, Ok(()));
        assert_eq!(
            layers.home,
            Err("cannot put an overlay on HOME /h: EINVAL".into())
        );
        assert_eq!(layers.filesystem, Err("Landlock: not supported".into()));
        assert_eq!(layers.processes, Ok("cgroup pids.max 512".into()));
        assert!(!layers.confines());
        assert!(parse_probe("").network.is_err());
    }
}
