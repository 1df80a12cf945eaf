//! The sandbox helper's own work, run in the short-lived, single-threaded process that
//! `agent-git sandbox-exec` starts: confine itself, then run the command as init of a new PID
//! namespace and pass its exit status on. Syscalls live here and nowhere else.

use landlock::{
    path_beneath_rules, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
    ABI,
};
use rustix::process::Resource;
use std::ffi::OsString;
use std::path::PathBuf;

/// The exit status of a helper that could not confine a command (so did not run it).
pub const SANDBOX_FAILED: i32 = 125;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelperArgs {
    /// The only directories the command may write to.
    pub writable: Vec<PathBuf>,
    /// Paths the command may not read, and paths inside them it may.
    pub hidden: Vec<PathBuf>,
    pub shown: Vec<PathBuf>,
    /// Paths inside the writable ones that stay read-only (the tests, in the clean room).
    pub read_only: Vec<PathBuf>,
    /// Make the rest of the filesystem read-only, in a mount namespace of its own.
    pub read_only_rest: bool,
    pub max_processes: u64,
    pub max_file_size: u64,
    pub max_cpu: u64,
    pub network: bool,
    pub landlock: bool,
    /// Report which layers hold, then exit without running anything.
    pub probe: bool,
    pub command: Vec<OsString>,
}

pub fn run(args: &HelperArgs) -> i32 {
    // The cgroup is joined first, with the ids agent-git runs as, before a user namespace.
    let processes = limit_processes(args.max_processes);
    let network = if args.network {
        isolate_network()
    } else {
        Err("not requested".into())
    };
    let limits = set_rlimits(args);
    let read_only = if args.read_only_rest {
        let in_user_namespace = *network.as_ref().unwrap_or(&false);
        read_only_elsewhere(&args.writable, &args.read_only, in_user_namespace)
    } else {
        Err("not requested".into())
    };
    let filesystem = if args.landlock {
        confine_files(&args.writable, &args.hidden, &args.shown)
    } else {
        Err("not requested".into())
    };
    if args.probe {
        let show = |r: &Result<String, String>| match r {
            Ok(how) => format!("ok {how}"),
            Err(e) => format!("error {e}"),
        };
        println!("network {}", show(&network.map(|_| String::new())));
        println!("filesystem {}", show(&filesystem.map(|_| String::new())));
        println!("readonly {}", show(&read_only.map(|_| String::new())));
        println!("processes {}", show(&processes));
        return 0;
    }
    let failures = [
        (args.network, network.err()),
        (args.landlock, filesystem.err()),
        (args.read_only_rest, read_only.err()),
        (true, limits.err()),
    ];
    for (wanted, failure) in failures {
        if let (true, Some(e)) = (wanted, failure) {
            eprintln!("agent-git sandbox: {e}; the command was not run");
            return SANDBOX_FAILED;
        }
    }
    run_as_namespace_init(&args.command)
}

/// Reads the probe's three lines back into layers.
pub fn parse_probe(text: &str) -> super::Layers {
    let field = |name: &str| -> Result<String, String> {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(name).map(str::trim))
            .ok_or_else(|| format!("the sandbox helper did not report on {name}"))?;
        match line.split_once(' ').unwrap_or((line, "")) {
            ("ok", how) => Ok(how.to_string()),
            (_, why) => Err(why.to_string()),
        }
    };
    super::Layers {
        network: field("network").map(|_| ()),
        filesystem: field("filesystem").map(|_| ()),
        read_only: field("readonly").map(|_| ()),
        processes: field("processes"),
    }
}

/// A fresh network namespace with only its own loopback, brought up so that servers the
/// command starts for itself can be reached.
/// Also a private IPC namespace and a fresh session keyring, and a user namespace of its own
/// (for root too, where the kernel allows): then SysV IPC objects and keys cannot carry state
/// from one command to the next, or outlive the run. Returns whether the user namespace is
/// its own.
fn isolate_network() -> Result<bool, String> {
    use rustix::thread::{unshare_unsafe, UnshareFlags};
    let uid = rustix::process::geteuid();
    let gid = rustix::process::getegid();
    let flags = UnshareFlags::NEWNET | UnshareFlags::NEWIPC;
    // SAFETY: this process is single-threaded and unshares no file table.
    let own_user = match unsafe { unshare_unsafe(UnshareFlags::NEWUSER | flags) } {
        Ok(()) => {
            map_own_ids(uid.as_raw(), gid.as_raw())?;
            true
        }
        Err(_) if uid.is_root() => {
            // SAFETY: as above.
            unsafe { unshare_unsafe(flags) }
                .map_err(|e| format!("cannot create a network namespace: {e}"))?;
            false
        }
        Err(e) => return Err(format!("cannot create a user and network namespace: {e}")),
    };
    join_fresh_keyring();
    loopback_up()?;
    Ok(own_user)
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

/// In a mount namespace of this process's own, everything read-only but `writable`, and the
/// `read_only` paths inside those read-only again: `chmod`, `chown` or `touch` of anything
/// else fails with EROFS (Landlock does not cover them), and a test run cannot rewrite the
/// tests it runs. Nothing here is seen outside: the namespace's mounts are private.
fn read_only_elsewhere(
    writable: &[PathBuf],
    read_only: &[PathBuf],
    in_user_namespace: bool,
) -> Result<(), String> {
    use rustix::mount::{mount_bind, mount_bind_recursive, mount_change, MountPropagationFlags};
    use rustix::thread::{unshare_unsafe, UnshareFlags};
    let uid = rustix::process::geteuid();
    let gid = rustix::process::getegid();
    let own_user = !uid.is_root() && !in_user_namespace;
    let flags = if own_user {
        UnshareFlags::NEWUSER | UnshareFlags::NEWNS
    } else {
        UnshareFlags::NEWNS
    };
    // SAFETY: this process is single-threaded and unshares no file table.
    unsafe { unshare_unsafe(flags) }
        .map_err(|e| format!("cannot create a mount namespace: {e}"))?;
    if own_user {
        map_own_ids(uid.as_raw(), gid.as_raw())?;
    }
    let fail = |what: &str, path: &std::path::Path, e: rustix::io::Errno| {
        format!("cannot {what} {}: {e}", path.display())
    };
    let root = std::path::Path::new("/");
    mount_change(
        root,
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )
    .map_err(|e| fail("make private", root, e))?;
    for dir in writable.iter().filter(|d| d.exists()) {
        mount_bind_recursive(dir, dir).map_err(|e| fail("bind", dir, e))?;
    }
    // The directories above a read-only path become mount points too: a mount point cannot
    // be renamed or removed, so the read-only path cannot be moved aside and replaced.
    let holders = holders_of(read_only, writable);
    for dir in &holders {
        mount_bind(dir, dir).map_err(|e| fail("bind", dir, e))?;
    }
    for path in read_only.iter().filter(|p| p.exists()) {
        mount_bind(path, path).map_err(|e| fail("bind", path, e))?;
    }
    set_read_only(root, true, true)?;
    for dir in writable.iter().filter(|d| d.exists()).chain(&holders) {
        set_read_only(dir, false, false)?;
    }
    // The working directory still points into the mount as it was before the binds: look it
    // up again, so relative paths reach the writable bind.
    let cwd = std::env::current_dir().map_err(|e| format!("cannot find the working dir: {e}"))?;
    std::env::set_current_dir(&cwd)
        .map_err(|e| format!("cannot enter {} again: {e}", cwd.display()))
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
fn set_read_only(path: &std::path::Path, read_only: bool, recursive: bool) -> Result<(), String> {
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

/// The pids cgroup this helper joins, so a fork bomb meets a ceiling. Root is not bound by
/// RLIMIT_NPROC, so for root only a cgroup limits processes.
fn cgroup_dir(pid: u32) -> Vec<(PathBuf, &'static str)> {
    vec![
        (
            PathBuf::from(format!("/sys/fs/cgroup/pids/agent-git/{pid}")),
            "cgroup.procs",
        ),
        (
            PathBuf::from(format!("/sys/fs/cgroup/agent-git-{pid}")),
            "cgroup.procs",
        ),
    ]
}

fn limit_processes(max: u64) -> Result<String, String> {
    let pid = std::process::id();
    for (dir, procs) in cgroup_dir(pid) {
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
    for (dir, procs) in cgroup_dir(helper_pid) {
        for _ in 0..100 {
            match std::fs::remove_dir(&dir) {
                Ok(()) => break,
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

fn set_rlimits(args: &HelperArgs) -> Result<(), String> {
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

/// Runs the command as pid 1 of a new PID namespace: when it dies, the kernel kills every
/// process it left behind, however it detached them.
fn run_as_namespace_init(command: &[OsString]) -> i32 {
    let Some((program, rest)) = command.split_first() else {
        eprintln!("agent-git sandbox: no command given");
        return SANDBOX_FAILED;
    };
    use rustix::thread::{unshare_unsafe, UnshareFlags};
    // SAFETY: this process is single-threaded and unshares no file table.
    if let Err(e) = unsafe { unshare_unsafe(UnshareFlags::NEWPID) } {
        eprintln!("agent-git sandbox: cannot create a PID namespace: {e}");
        return SANDBOX_FAILED;
    }
    drop_capabilities();
    match std::process::Command::new(program).args(rest).status() {
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt;
            status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
        }
        Err(e) => {
            eprintln!(
                "agent-git sandbox: cannot run {}: {e}",
                program.to_string_lossy()
            );
            SANDBOX_FAILED
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_lines_parse_into_layers() {
        let layers = parse_probe("network ok \nfilesystem error Landlock: not supported\nreadonly ok \nprocesses ok cgroup pids.max 512\n");
        assert_eq!(layers.network, Ok(()));
        assert_eq!(layers.read_only, Ok(()));
        assert_eq!(layers.filesystem, Err("Landlock: not supported".into()));
        assert_eq!(layers.processes, Ok("cgroup pids.max 512".into()));
        assert!(!layers.confines());
        assert!(parse_probe("").network.is_err());
    }
}
