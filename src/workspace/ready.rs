//! A pooled work tree made ready in a thread of its own while the run goes on to its first
//! model request: the base's test and the brief read the base's objects, never the work tree,
//! so nothing before the first request needs it. Whatever reads or writes the work tree, its
//! index or its HEAD waits for it first (`Workspace::tree`); a preparation that failed fails
//! each of them, so no tool, commit or report ever sees a half-made tree.

use super::setup::SetupError;
use super::WorkspaceError;
use std::cell::RefCell;
use std::sync::{Condvar, Mutex};
use std::thread::JoinHandle;

/// Whether the run's start is over: its base tested (or no test to wait for). The pooled tree
/// made exact, which nothing before the first request needs, waits for it: on two cores it
/// took its share of the CPU from the base's test, which the first request waits for.
/// Whatever waits for the tree opens the gate first, so nothing waits for itself.
static START: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());

/// Lets the work that waits for the start's end go on. Once open, it stays open.
pub fn start_is_over() {
    let (over, changed) = &START;
    *over
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
    changed.notify_all();
}

/// Waits until the start is over (`start_is_over`).
pub fn after_the_start() {
    let (over, changed) = &START;
    let mut open = over
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    while !*open {
        open = changed
            .wait(open)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
}

/// Where a work tree's preparation stands.
enum State {
    Ready,
    /// The thread, and what to do instead where it fails.
    Going(JoinHandle<Result<(), SetupError>>, Fallback),
    Failed(String),
}

/// What makes the tree anew where its preparation failed: run by the first wait, on the
/// thread that waits.
pub(super) type Fallback = Box<dyn FnOnce() -> Result<(), SetupError>>;

/// A work tree's preparation: ready from the start, or going on in a thread.
pub(super) struct Readiness(RefCell<State>);

impl Readiness {
    /// A work tree that was made before the workspace was.
    pub(super) fn ready() -> Readiness {
        Readiness(RefCell::new(State::Ready))
    }

    /// A work tree that `going` is making; `anew` makes it where `going` fails.
    pub(super) fn going(going: JoinHandle<Result<(), SetupError>>, anew: Fallback) -> Readiness {
        Readiness(RefCell::new(State::Going(going, anew)))
    }

    /// Waits for the preparation to end: why it failed, each time this is asked.
    pub(super) fn wait(&self) -> Result<(), WorkspaceError> {
        self.end(true)
    }

    /// As `wait`, but where the preparation failed nothing is checked out anew: for a run
    /// that is over, whose slot is cleared instead.
    pub(super) fn settle(&self) -> Result<(), WorkspaceError> {
        self.end(false)
    }

    fn end(&self, fall_back: bool) -> Result<(), WorkspaceError> {
        let mut state = self.0.borrow_mut();
        if matches!(*state, State::Going(..)) {
            start_is_over();
        }
        *state = match std::mem::replace(&mut *state, State::Ready) {
            State::Going(going, anew) => {
                let made = match going.join() {
                    Ok(made) => made.map_err(|e| e.to_string()),
                    Err(_) => Err("its preparation panicked".to_string()),
                };
                match made {
                    Ok(()) => State::Ready,
                    Err(why) if !fall_back => {
                        State::Failed(format!("the work tree could not be made ready ({why})"))
                    }
                    Err(why) => match anew() {
                        Ok(()) => State::Ready,
                        Err(e) => State::Failed(format!(
                            "the work tree could not be made ready ({why}), nor checked out \
                             anew: {e}"
                        )),
                    },
                }
            }
            done => done,
        };
        match &*state {
            State::Failed(why) => Err(WorkspaceError::Unsafe(why.clone())),
            _ => Ok(()),
        }
    }
}

impl Drop for Readiness {
    /// A preparation still going when its workspace goes is waited for (its thread also holds
    /// the slot's lock); nothing is checked out anew for a workspace that goes.
    fn drop(&mut self) {
        if let State::Going(going, _) = std::mem::replace(self.0.get_mut(), State::Ready) {
            start_is_over();
            let _ = going.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    fn failing() -> Result<(), SetupError> {
        Err(SetupError::Io(
            "pool-1".into(),
            std::io::Error::other("cannot empty it"),
        ))
    }

    /// A preparation that fails is made good by its fallback, run once by the first wait; where
    /// that fails too, every wait says why, both ways. A tree that became ready stays ready.
    #[test]
    fn a_failed_preparation_falls_back_once_and_a_failed_fallback_fails_every_wait() {
        let ran = Arc::new(AtomicUsize::new(0));
        let counted = ran.clone();
        let saved = Readiness::going(
            std::thread::spawn(failing),
            Box::new(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }),
        );
        saved.wait().unwrap();
        saved.wait().unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 1);

        let lost = Readiness::going(std::thread::spawn(failing), Box::new(failing));
        for _ in 0..2 {
            let why = lost.wait().unwrap_err().to_string();
            assert!(
                why.contains("could not be made ready")
                    && why.matches("cannot empty it").count() == 2,
                "{why}"
            );
        }
        let panicking = Readiness::going(
            std::thread::spawn(|| panic!("in the preparation")),
            Box::new(failing),
        );
        assert!(panicking
            .wait()
            .unwrap_err()
            .to_string()
            .contains("panicked"));

        let unused = Arc::new(AtomicBool::new(false));
        let marks = unused.clone();
        let going = Readiness::going(
            std::thread::spawn(|| Ok(())),
            Box::new(move || {
                marks.store(true, Ordering::SeqCst);
                Ok(())
            }),
        );
        going.wait().unwrap();
        assert!(
            !unused.load(Ordering::SeqCst),
            "a preparation that held fell back"
        );
        Readiness::ready().wait().unwrap();
    }

    /// A run that is over settles its tree's preparation without checking anything out anew:
    /// a failure is said, and the fallback never runs.
    #[test]
    fn settling_a_failed_preparation_checks_nothing_out_anew() {
        let ran = Arc::new(AtomicBool::new(false));
        let marks = ran.clone();
        let failed = Readiness::going(
            std::thread::spawn(failing),
            Box::new(move || {
                marks.store(true, Ordering::SeqCst);
                Ok(())
            }),
        );
        assert!(failed.settle().is_err());
        assert!(failed.wait().is_err());
        assert!(!ran.load(Ordering::SeqCst), "settling fell back");
        let held = Readiness::going(std::thread::spawn(|| Ok(())), Box::new(failing));
        held.settle().unwrap();
        held.wait().unwrap();
    }

    /// A workspace that goes while its tree is being made waits for the making to end: the
    /// slot is never free while a thread still writes its tree.
    #[test]
    fn a_preparation_still_going_is_waited_for_when_it_goes() {
        let done = Arc::new(AtomicBool::new(false));
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let marks = done.clone();
        let going = Readiness::going(
            std::thread::spawn(move || {
                let _ = wait.recv();
                std::thread::sleep(std::time::Duration::from_millis(50));
                marks.store(true, Ordering::SeqCst);
                Ok(())
            }),
            Box::new(failing),
        );
        release.send(()).unwrap();
        drop(going);
        assert!(
            done.load(Ordering::SeqCst),
            "dropped before its thread ended"
        );
    }
}
