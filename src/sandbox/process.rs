//! Runs a prepared command in its own process group, with a timeout that kills the whole group.
//! The only place that waits for a confined process.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Output beyond this is cut from the front: failures and summaries are at the end.
const MAX_OUTPUT: u64 = 4 * 1024 * 1024;
const POLL: Duration = Duration::from_millis(20);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRun {
    /// stdout and stderr, interleaved as written.
    pub output: String,
    /// The process that ran (the shell, or the sandbox helper).
    pub pid: u32,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub interrupted: bool,
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
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            if rustix::process::getppid() != Some(parent) {
                return Err(std::io::Error::other("agent-git is gone"));
            }
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
        std::thread::sleep(POLL);
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
}
