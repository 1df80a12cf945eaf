//! agent-git's own runs as child processes (an eval's runs, a fix's attempts): each in a
//! process group of its own, so that a terminal's Ctrl-C reaches only the parent, which
//! passes it on; a child told to stop writes its report as a Ctrl-C'd run does, and is
//! killed if it has not ended within a grace.

use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// On its own, before the deadline and before any interrupt.
    Exited,
    /// Stopped because the deadline passed (SIGINT to its group, SIGKILL after `KILL_GRACE`).
    TimedOut,
    /// Stopped because `interrupt` was set (Ctrl-C passed on to its group).
    Interrupted,
}

/// How long a run may take to write its report after it was told to stop.
pub const KILL_GRACE: Duration = Duration::from_secs(30);

/// Starts `cmd` (its stdio already set) as the leader of a new process group.
pub fn spawn(cmd: &mut Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0).spawn()
}

/// Waits for `child`, started by `spawn`. At `deadline`, or when `interrupt` is set, its group
/// gets SIGINT, and SIGKILL after `KILL_GRACE`.
pub fn wait(
    child: &mut Child,
    deadline: Option<Instant>,
    interrupt: &AtomicBool,
) -> std::io::Result<Ended> {
    let mut ended = Ended::Exited;
    let mut signalled: Option<Instant> = None;
    let group = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    let exit = crate::sandbox::ExitWatch::new(child);
    loop {
        if child.try_wait()?.is_some() {
            return Ok(ended);
        }
        let late = deadline.is_some_and(|d| Instant::now() >= d);
        if ended == Ended::Exited && (late || interrupt.load(Ordering::SeqCst)) {
            ended = if late {
                Ended::TimedOut
            } else {
                Ended::Interrupted
            };
            if let Some(pid) = group {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::INT);
            }
            signalled = Some(Instant::now());
        }
        if signalled.is_some_and(|at| at.elapsed() >= KILL_GRACE) {
            if let Some(pid) = group {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
            signalled = None;
        }
        // Wakes at once when the child ends; otherwise to hear Ctrl-C and watch the clock.
        exit.block(Duration::from_millis(50));
    }
}
