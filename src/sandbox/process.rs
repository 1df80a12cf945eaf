//! Runs a prepared command in its own process group, with a timeout that kills the whole group.
//! The only place that waits for a confined process.

use std::io::{Read, Seek, SeekFrom};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Output beyond this is cut from the front: failures and summaries are at the end.
const MAX_OUTPUT: u64 = 4 * 1024 * 1024;
/// How often a wait wakes, though the process has not ended, to hear an interrupt and tell
/// `waiting`; an exit ends the wait at once.
const WAKE: Duration = Duration::from_millis(100);
/// Where the kernel has no pidfds (before Linux 5.3), how often the exit is looked for.
const FALLBACK_POLL: Duration = Duration::from_millis(20);

/// One command's run, before any test output is read from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRun {
    /// stdout and stderr, interleaved as written.
    pub output: String,
    /// The process that ran (the shell, or the sandbox helper).
    pub pid: u32,
    /// None when a signal ended it.
    pub exit_code: Option<i32>,
    /// Killed at its timeout.
    pub timed_out: bool,
    /// Stopped because the run was interrupted.
    pub interrupted: bool,
}

/// In a child between fork and exec: asks the kernel to kill it when `parent` (agent-git)
/// ends, however it ends, and fails if it already has. Only async-signal-safe calls (prctl(2),
/// getppid(2)); it touches no memory of the parent.
pub fn die_with(parent: rustix::process::Pid) -> std::io::Result<()> {
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
    if rustix::process::getppid() != Some(parent) {
        return Err(std::io::Error::other("agent-git is gone"));
    }
    Ok(())
}

/// Runs a prepared command in its own process group, output interleaved in one file, and
/// kills the whole group at the timeout or on interrupt. `waiting` hears how long it has run,
/// at every poll, so a caller can say that something is still going on.
pub fn run_prepared(
    mut command: Command,
    timeout: Duration,
    interrupt: &AtomicBool,
    waiting: &mut dyn FnMut(Duration),
) -> std::io::Result<RawRun> {
    let mut out = tempfile::tempfile()?;
    command
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out.try_clone()?);
    let parent = rustix::process::getpid();
    // SAFETY: setsid(2), prctl(2), getppid(2) and close_range(2) are async-signal-safe and
    // touch no memory of the parent.
    unsafe {
        command.pre_exec(move || {
            // A session of its own: no controlling terminal, so nothing it runs can type into
            // the user's (TIOCSTI) or read from it; and a process group to kill as one.
            rustix::process::setsid()?;
            // Killed if agent-git dies, however it dies (the sandbox helper takes the rest of
            // what it started with it); agent-git spawns from the thread that lives longest.
            die_with(parent)?;
            // Nothing agent-git inherited (a descriptor of the user's shell, say) reaches the
            // command: every descriptor above stderr closes at exec.
            const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
            libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                libc::c_uint::MAX,
                CLOSE_RANGE_CLOEXEC,
            );
            Ok(())
        });
    }
    let mut child = command.spawn()?;
    let started = Instant::now();
    let exit = ExitWatch::new(&child);
    let (status, timed_out, interrupted) = loop {
        if let Some(status) = child.try_wait()? {
            break (Some(status), false, false);
        }
        let timed_out = started.elapsed() >= timeout;
        let interrupted = interrupt.load(Ordering::SeqCst);
        if timed_out || interrupted {
            kill_group(child.id());
            let _ = child.wait();
            break (None, timed_out, interrupted);
        }
        waiting(started.elapsed());
        exit.block(timeout.saturating_sub(started.elapsed()).min(WAKE));
    };
    // The shell may be gone while its children still hold the group: end them too.
    kill_group(child.id());
    Ok(RawRun {
        output: read_capped(&mut out)?,
        pid: child.id(),
        exit_code: status.and_then(|s| s.code()),
        timed_out,
        interrupted,
    })
}

/// Waits for a child to end without a fixed sleep: the kernel wakes a poll on its pidfd the
/// moment it exits. Where there are no pidfds, it sleeps a little at a time instead.
pub struct ExitWatch {
    pidfd: Option<OwnedFd>,
}

impl ExitWatch {
    /// Watches `child`, which must not have been waited for yet (its pid is still its own).
    pub fn new(child: &Child) -> ExitWatch {
        let pid = i32::try_from(child.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw);
        // The kernel makes every pidfd close-on-exec: no command started meanwhile inherits it.
        let pidfd = pid.and_then(|pid| {
            rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
        });
        ExitWatch { pidfd }
    }

    /// Returns when the child has ended (not yet reaped: `try_wait` reaps it), when `at_most`
    /// has passed, or a little earlier on a signal; the caller looks again either way.
    pub fn block(&self, at_most: Duration) {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};

        let Some(pidfd) = &self.pidfd else {
            return std::thread::sleep(at_most.min(FALLBACK_POLL));
        };
        // A wait too long for a timespec has no end; callers pass a bounded one.
        let timeout = Timespec::try_from(at_most).ok();
        let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
        match poll(&mut fds, timeout.as_ref()) {
            // A signal only ends this wait early: the caller looks again.
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => std::thread::sleep(at_most.min(FALLBACK_POLL)),
        }
    }
}

fn kill_group(pid: u32) {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        // The child leads its own session and group (setsid); a group already gone is fine.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

fn read_capped(file: &mut std::fs::File) -> std::io::Result<String> {
    let len = file.seek(SeekFrom::End(0))?;
    let start = len.saturating_sub(MAX_OUTPUT);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Ok(if start > 0 {
        format!("[{start} bytes of earlier output cut]\n{text}")
    } else {
        text
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cmd: &str, timeout_ms: u64) -> RawRun {
        let dir = tempfile::tempdir().unwrap();
        let never = AtomicBool::new(false);
        let mut shell = Command::new("sh");
        shell.arg("-c").arg(cmd).current_dir(dir.path());
        run_prepared(
            shell,
            Duration::from_millis(timeout_ms),
            &never,
            &mut |_| {},
        )
        .unwrap()
    }

    #[test]
    fn captures_both_streams_and_the_exit_code() {
        let r = run("echo out; echo err >&2; exit 3", 10_000);
        assert_eq!(r.output, "out\nerr\n");
        assert_eq!(r.exit_code, Some(3));
        assert!(!r.timed_out);
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("late");
        let cmd = format!("(sleep 1; touch '{}') & sleep 30", marker.display());
        let started = Instant::now();
        let r = run(&cmd, 300);
        assert!(r.timed_out);
        assert_eq!(r.exit_code, None);
        assert!(started.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(1500));
        assert!(
            !marker.exists(),
            "the background child outlived the timeout"
        );
    }

    #[test]
    fn an_exit_ends_the_wait_at_once_and_a_running_child_only_its_bound() {
        let mut quick = Command::new("sh")
            .arg("-c")
            .arg("sleep 0.1")
            .spawn()
            .unwrap();
        let started = Instant::now();
        ExitWatch::new(&quick).block(Duration::from_secs(60));
        assert!(started.elapsed() < Duration::from_secs(30));
        assert!(quick.wait().unwrap().success());

        let mut slow = Command::new("sleep").arg("60").spawn().unwrap();
        let started = Instant::now();
        ExitWatch::new(&slow).block(Duration::from_millis(50));
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert!(slow.try_wait().unwrap().is_none());
        slow.kill().unwrap();
        slow.wait().unwrap();
    }

    #[test]
    fn an_interrupt_ends_the_command_and_waiting_hears_the_time() {
        let dir = tempfile::tempdir().unwrap();
        let interrupt = AtomicBool::new(false);
        let mut heard = Vec::new();
        let mut shell = Command::new("sh");
        shell.arg("-c").arg("sleep 60").current_dir(dir.path());
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(300));
                interrupt.store(true, Ordering::SeqCst);
            });
            let long = Duration::from_secs(120);
            run_prepared(shell, long, &interrupt, &mut |t| heard.push(t)).unwrap()
        });
        assert!(r.interrupted && !r.timed_out);
        assert_eq!(r.exit_code, None);
        assert!(!heard.is_empty() && heard.windows(2).all(|w| w[0] <= w[1]));
        assert!(heard[heard.len() - 1] < Duration::from_secs(60));
    }
}
