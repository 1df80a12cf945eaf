//! One run, from a prepared plan to the report commit: the part every entry point shares.

use crate::agent::{Agent, Budget, Outcome, RunResult};
use crate::guard::{Guard, Protection};
use crate::model::Model;
use crate::report::Report;
use crate::sandbox::{Limits, Mode, Reach, Sandbox};
use crate::testrun::{TestPlan, TestResult};
use crate::tools::Registry;
use crate::verify::{RoomAhead, TestSetup, TreeTester, Unreadable, Verifier, Waiting};
use crate::workspace::pool::{self, Slot};
use crate::workspace::{
    config_with_credentials, record_tested, BaseInfo, SetupError, Tested, Workspace,
};
use git2::Repository;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Everything a run needs, checked before its branch exists.
pub struct RunPlan {
    /// The user's repository; the run writes to it only through `workspace`.
    pub repo: Repository,
    /// The commit the branch starts from.
    pub base: BaseInfo,
    /// The branch to create (or, resuming, the one to go on with).
    pub branch: String,
    /// Eight hex digits naming the run in its report and trailers.
    pub run_id: String,
    /// What the agent is to do, as the user wrote it.
    pub task: String,
    /// The model the loop talks to.
    pub model: Box<dyn Model>,
    /// The paths the agent may not change, refused by the tools and again at every commit.
    pub protection: Protection,
    /// How the tests are run in the clean room.
    pub tests: TestPlan,
    /// Turns, cost and time the run may take.
    pub budget: Budget,
    /// The system prompt.
    pub system: String,
    /// What the first message holds besides the task and the first test result.
    pub brief: crate::brief::Brief,
    /// Leave the work tree on the branch afterwards instead of giving it back to the pool.
    pub keep_worktree: bool,
    /// Where to write the whole conversation as JSON, when asked.
    pub transcript: Option<PathBuf>,
    /// Files of the run the tests must not read (the recording of the model's replies).
    pub private_files: Vec<PathBuf>,
    /// How commands and tests are confined.
    pub sandbox: Mode,
    /// Directories the sandbox leaves writable on the user's request.
    pub allow_write: Vec<PathBuf>,
    /// Paths under HOME the sandbox lets commands read on the user's request.
    pub allow_read: Vec<PathBuf>,
    /// Files above this size are not committed.
    pub max_file_size: u64,
    /// Stop before the model is called if the tests already pass; keep no branch then.
    pub only_if_failing: bool,
    /// A person is at the terminal to answer the model's questions (ask_user).
    pub interactive: bool,
    /// Agent commits run the repository's pre-commit and commit-msg hooks.
    pub run_hooks: bool,
    /// What the report should say beyond the model's notes.
    pub notes: Vec<String>,
    /// The conversation of the attempt being resumed; None for a new run.
    pub resume: Option<Vec<crate::model::Message>>,
    /// What keys a pass of the base's tree in the record of passes (`check::identity`).
    pub tested_as: String,
    /// For `--if-failing`: the summary of the pass the record held for the base's tree when
    /// the plan was made. Then nothing runs, and the plan holds no protection.
    pub passed_before: Option<String>,
    /// When the command started: a run's time counts from there.
    pub started: std::time::Instant,
    /// The clean room, being reset to the base's tree while the plan is made.
    pub room_ahead: std::cell::Cell<Option<RoomAhead>>,
    /// python3's facts the plan was made with, and its answer to come where they were
    /// remembered ones.
    pub python: crate::prepare::AskedPython,
    /// The settings the plan was made from: it is made again from them if python3's answer
    /// differs from what was remembered.
    pub settings: crate::settings::Settings,
    /// How hard the model is asked to think.
    pub reasoning: crate::model::Reasoning,
    /// When a passed run's changes are each proven by the tests.
    pub prove: crate::verify::ProveLimits,
    /// What is to be said of the user's uncommitted changes, being looked at beside the start.
    pub uncommitted: Pending,
    /// Which attempt of a set the run is.
    pub attempt: Option<crate::attempts::AttemptOf>,
    /// Say more of what the run sets up (`-v`).
    pub verbose: bool,
    /// Where the run's steps go as JSON events, as they happen (`--json-events`).
    pub events: Option<Events>,
}

/// Where a run's JSON events go.
pub type Events = Box<dyn FnMut(&serde_json::Value)>;

/// A line to say, being worked out in a thread of its own; None where there is nothing to say.
pub type Notice = std::thread::JoinHandle<Option<String>>;

impl RunPlan {
    /// Holds the plan to python3's answer where it was made from remembered facts: where the
    /// answer differs, the tests are planned again with it (and the base must be tested again
    /// with them). The test plan and the protection count only from here.
    fn hold_to_python(&mut self, progress: &mut dyn FnMut(&str)) -> Result<Held, RunError> {
        if self.python.confirm() == crate::prepare::Confirmed::Same {
            return Ok(Held::Same);
        }
        // The protection may be another (it knows python3's modules): the room's memo of it goes.
        if let Some(mut room) = self.room_ahead.take() {
            room.forget_protected();
            self.room_ahead.set(Some(room));
        }
        let found =
            crate::prepare::tests_at(&self.repo, self.base.id, &self.settings, &mut self.python)?;
        // The base's test stands on its plan alone (its tree is the base's, protected files
        // and all): only another plan must test it again.
        let other_plan = found.plan != self.tests;
        self.tested_as = crate::check::identity(&found.plan, &self.settings, self.sandbox);
        (self.tests, self.protection) = (found.plan, found.protection);
        (self.allow_write, self.allow_read) = (found.allow_write, found.allow_read);
        if !other_plan {
            return Ok(Held::OtherProtection);
        }
        progress(
            "python3 answered otherwise than it did for an earlier run: the tests are planned \
             again",
        );
        Ok(Held::OtherPlan)
    }
}

/// What holding a plan to python3's answer changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    Same,
    /// The protection may be another; the test plan is the same.
    OtherProtection,
    /// The test plan is another: the base must be tested again with it.
    OtherPlan,
}

/// A run that got as far as its report.
pub struct Finished {
    /// How it ended; the exit code follows from it.
    pub outcome: Outcome,
    /// The report, as committed and as printed.
    pub message: String,
    /// The `--json` object.
    pub json: Value,
}

/// Why a run ended without a report.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// git failed, or the branch or its work tree could not be made.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The tests could not be planned again with what python3 answered.
    #[error(transparent)]
    Plan(#[from] crate::prepare::PrepareError),
    /// After the branch exists: the report could not be written.
    #[error("{0}")]
    Harness(String),
}

/// Runs the plan. `progress` hears a line per step; `waiting` hears how long a test run has
/// been going, while it goes.
pub fn execute(
    mut plan: RunPlan,
    progress: &mut dyn FnMut(&str),
    waiting: Waiting,
) -> Result<Finished, RunError> {
    let started = plan.started;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| RunError::Harness(format!("cannot start the async runtime: {e}")))?;
    let interrupt = Arc::new(AtomicBool::new(false));
    watch_signals(&runtime, interrupt.clone(), None)
        .map_err(|e| RunError::Harness(format!("cannot watch for Ctrl-C: {e}")))?;

    // The plan stands: what it worked out from the base's tree may be kept for the next run.
    crate::workspace::derived::open();
    let swept = crate::workspace::sweep::sweep_leftovers(Some(&plan.repo));
    if !swept.is_empty() {
        progress(&swept.describe());
    }
    // A resumed run goes on on its branch, which stays whatever happens.
    let resuming = plan.resume.is_some();
    let mut baseline = None;
    if plan.only_if_failing && !resuming {
        match answer_before_checkout(&plan, &interrupt, progress, waiting) {
            Before::Answered(mut finished, processes) => {
                add_timing(
                    &mut finished.json,
                    started.elapsed(),
                    Duration::ZERO,
                    processes,
                );
                return Ok(finished);
            }
            Before::Failing(tested) => baseline = Some(tested),
            Before::Unknown => {}
        }
    }
    let (mut workspace, slot, confined) = if plan.only_if_failing && !resuming {
        // What was learnt of the base without a work tree is all there is to learn.
        crate::workspace::start_is_over();
        let checked_out = work_tree(&plan.repo, &WorkTreePlan::from(&plan), resuming);
        let (workspace, slot, held) = confirm_start(&mut plan, checked_out, resuming, progress)?;
        if held == Held::OtherPlan {
            baseline = None;
        }
        let confined = Confinement::of(&plan, &workspace);
        (workspace, slot, confined)
    } else {
        let (workspace, slot, tested, confined) =
            beside_baseline(&mut plan, resuming, &interrupt, progress, waiting)?;
        baseline = tested;
        (workspace, slot, confined)
    };
    crate::workspace::start_is_over();
    workspace.max_file_size = plan.max_file_size;
    let mut notice = std::mem::take(&mut plan.uncommitted);
    let set_up = SetUp {
        confined,
        baseline,
        asked: notice.go(),
    };
    let mut said = |line: &str| {
        notice.say_if_done(false, progress);
        progress(line);
    };
    let ran = run_in(
        &mut plan, &workspace, set_up, &interrupt, &mut said, waiting, &runtime,
    );
    notice.say_if_done(true, progress);
    let spent = ran
        .as_ref()
        .ok()
        .map(|(result, _)| (result.model_time, result.process_time));
    let with_timing = |mut finished: Finished| {
        if let Some((model, processes)) = spent {
            add_timing(&mut finished.json, started.elapsed(), model, processes);
        }
        finished
    };
    let finished = match ran {
        Ok((result, sandbox)) if !result.outcome.keeps_branch() && !resuming => {
            // The start named the branch; the end says it is gone.
            progress(&format!(
                "no branch kept: {} is deleted, as the run changed nothing ({})",
                plan.branch,
                result.outcome.name()
            ));
            return finish_without_branch(&plan, workspace, slot, result, &sandbox)
                .map(with_timing);
        }
        Ok((result, sandbox)) => write_report(&plan, &workspace, result, &sandbox, progress),
        Err(e) => Err(e),
    };
    if plan.keep_worktree {
        workspace.forget_lease();
    } else if let Err(e) = pool::finish(workspace, slot) {
        progress(&format!("could not remove the work tree: {e}"));
    }
    finished.map(with_timing)
}

/// What is to be said of the user's uncommitted changes, looked at in a thread of its own
/// (`start::look_at_uncommitted`) once the model is first asked, or once something waits for
/// it. Nothing before the first request needs it: on a large checkout the look (an `lstat`
/// a file) took a core's worth of the start, beside the base's test and the brief. It is said with the first line after it is done, and at the latest before
/// the report.
#[derive(Default)]
pub struct Pending {
    look: Option<Notice>,
    go: Option<Go>,
}

/// Lets a look that waits for the model's first request go on.
pub type Go = std::sync::mpsc::Sender<()>;

impl Pending {
    /// The look, to be said when it is done, and what lets it go on.
    pub fn new(look: Option<(Notice, Go)>) -> Pending {
        let (look, go) = look.unzip();
        Pending { look, go }
    }

    /// What lets the look go on, for the model's first request.
    fn go(&self) -> Option<Go> {
        self.go.clone()
    }

    /// Says the line, if there is one, once the look is done (letting it go on and waiting for
    /// it if `wait`).
    fn say_if_done(&mut self, wait: bool, progress: &mut dyn FnMut(&str)) {
        if wait {
            if let Some(go) = &self.go {
                let _ = go.send(());
            }
        } else if !self.look.as_ref().is_some_and(|look| look.is_finished()) {
            return;
        }
        if let Some(line) = self.look.take().and_then(|look| look.join().ok().flatten()) {
            progress(&line);
        }
    }
}

/// The run's work tree in `repo` (the plan's, or another handle on it): a pooled one, unless
/// it is to be kept after the run.
fn work_tree(repo: &Repository, plan: &WorkTreePlan, resuming: bool) -> WorkTree {
    let (base, branch, id) = (plan.base, &plan.branch, &plan.run_id);
    Ok(match (plan.keep_worktree, resuming) {
        (false, _) => Workspace::take(repo, base, branch, id, !resuming)?,
        (true, true) => (Workspace::resume(repo, base, branch, id)?, None),
        (true, false) => (Workspace::create(repo, base, branch, id)?, None),
    })
}

/// What the run's work tree is made from: all a thread of its own needs of the plan.
struct WorkTreePlan {
    base: git2::Oid,
    branch: String,
    run_id: String,
    keep_worktree: bool,
}

impl From<&RunPlan> for WorkTreePlan {
    fn from(plan: &RunPlan) -> Self {
        WorkTreePlan {
            base: plan.base.id,
            branch: plan.branch.clone(),
            run_id: plan.run_id.clone(),
            keep_worktree: plan.keep_worktree,
        }
    }
}

/// The base's test result, taken before the verifier existed: the time its processes took,
/// and its sandbox as the report names it.
struct Baseline {
    result: TestResult,
    processes: Duration,
    sandbox: String,
}

/// The run's work tree and the slot it took, or why there is none.
type WorkTree = Result<(Workspace, Option<Slot>), SetupError>;

/// The plan held to python3's answer (`RunPlan::hold_to_python`) once the work tree is
/// there, and the run's start said. Where the plan does not hold, nothing of the run is left
/// but the branch it resumed.
fn confirm_start(
    plan: &mut RunPlan,
    checked_out: WorkTree,
    resuming: bool,
    progress: &mut dyn FnMut(&str),
) -> Result<(Workspace, Option<Slot>, Held), RunError> {
    let (workspace, slot) = checked_out?;
    let held = match plan.hold_to_python(progress) {
        Ok(held) => held,
        Err(e) => {
            let _ = match resuming {
                true => pool::finish(workspace, slot),
                false => pool::discard(workspace, slot),
            };
            return Err(e);
        }
    };
    plan.uncommitted.say_if_done(false, progress);
    progress(&format!(
        "run {} on branch {} (work tree {})",
        plan.run_id,
        plan.branch,
        workspace.path().display()
    ));
    if let Some(events) = plan.events.as_mut() {
        events(&serde_json::json!({
            "type": "start", "run_id": plan.run_id, "branch": plan.branch,
            "base": plan.base.id.to_string(), "task": plan.task,
        }));
    }
    if !plan.only_if_failing || resuming {
        progress(&format!("tests: {}", plan.tests.describe()));
    }
    Ok((workspace, slot, held))
}

/// The work tree checked out while the base's tree is tested in a thread, in a clean room
/// and a sandbox of its own, which need no work tree: the first request waits for the slower
/// of the two, not for both. The run's own confinement is set up meanwhile too (its sandbox's
/// probe is a process of its own). The start is said as soon as the work tree is there; the test's
/// running lines are shown as the run's own, and Ctrl-C stops it as it stops the run. Its
/// result, and the time its processes took, come back where it ran to its end with the plan
/// that holds; otherwise the verifier tests the base itself, as it always did.
fn beside_baseline(
    plan: &mut RunPlan,
    resuming: bool,
    interrupt: &AtomicBool,
    progress: &mut dyn FnMut(&str),
    waiting: Waiting,
) -> Result<(Workspace, Option<Slot>, Option<Baseline>, Confined), RunError> {
    let base_test = BaseTest::of(plan);
    let stop = AtomicBool::new(false);
    let (tell, told) = std::sync::mpsc::channel::<(String, Duration)>();
    std::thread::scope(|scope| {
        let stop = &stop;
        let testing = base_test.map(|test| {
            scope.spawn(move || {
                let waiting = |label: &str, elapsed: Duration| {
                    let _ = tell.send((label.to_string(), elapsed));
                };
                test.run(stop, &waiting)
            })
        });
        let checked_out = work_tree(&plan.repo, &WorkTreePlan::from(&*plan), resuming);
        let started =
            confirm_start(plan, checked_out, resuming, progress).map(|(workspace, slot, held)| {
                let confined = Confinement::of(plan, &workspace);
                (workspace, slot, held, confined)
            });
        // While the base's tests run, what reading their output and the first brief need.
        scope.spawn(|| {
            crate::testrun::warm_up();
            crate::brief::warm_up();
        });
        let Some(testing) = testing else {
            return started.map(|(workspace, slot, _, confined)| (workspace, slot, None, confined));
        };
        // A test of a plan that does not hold, or of a run that will not go on, says nothing.
        let held = started.as_ref().ok().map(|(_, _, held, _)| *held);
        if !matches!(held, Some(Held::Same | Held::OtherProtection)) {
            stop.store(true, Ordering::SeqCst);
        }
        loop {
            if interrupt.load(Ordering::SeqCst) {
                stop.store(true, Ordering::SeqCst);
            }
            plan.uncommitted.say_if_done(false, progress);
            match told.recv_timeout(Duration::from_millis(50)) {
                Ok((label, elapsed)) => waiting(&label, elapsed),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                // The thread is done: it let go of its end.
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        let tested = testing.join().ok().and_then(Result::ok);
        let tested = tested.and_then(|(result, sandbox, processes, mut room)| {
            if held != Some(Held::Same) {
                room.forget_protected();
            }
            plan.room_ahead.set(Some(room));
            (!result.interrupted && !stop.load(Ordering::SeqCst)).then_some(Baseline {
                result,
                processes,
                sandbox,
            })
        });
        let (workspace, slot, _, confined) = started?;
        Ok((workspace, slot, tested, confined))
    })
}

/// The run's own confinement: the guard of its work tree and the sandbox of the model's
/// commands (and of the tests the verifier runs), or why it could not be set up (the run then
/// ends as a harness error, its report on the branch).
type Confined = Result<Confinement, String>;

/// What the start set up for the agent's work: its confinement, the base's test result
/// where it was taken before the verifier existed, and what lets the look at the user's
/// checkout go on once the model is asked.
struct SetUp {
    confined: Confined,
    baseline: Option<Baseline>,
    asked: Option<Go>,
}

struct Confinement {
    guard: Guard,
    sandbox: Sandbox,
}

impl Confinement {
    /// Set up for the plan as it holds (after `confirm_start`) and the run's work tree.
    fn of(plan: &RunPlan, workspace: &Workspace) -> Confined {
        let guard =
            Guard::new(workspace.path(), plan.protection.clone()).map_err(|e| e.to_string())?;
        let helper = std::env::current_exe()
            .map_err(|e| format!("cannot find agent-git's own binary: {e}"))?;
        let sandbox = Sandbox::start(
            plan.sandbox,
            helper,
            guard.root(),
            Limits::default(),
            Reach {
                allow_write: plan.allow_write.clone(),
                allow_read: plan.allow_read.clone(),
                readable: vec![workspace.git_dir().to_path_buf()],
                hidden: workspace.config_with_credentials(),
            },
        )
        .map_err(|e| format!("cannot set up the sandbox: {e}"))?;
        Ok(Confinement { guard, sandbox })
    }
}

/// What testing the base's tree needs of the plan, its own, for a thread of its own.
struct BaseTest {
    mode: Mode,
    allow_write: Vec<PathBuf>,
    allow_read: Vec<PathBuf>,
    common_dir: PathBuf,
    user_workdir: Option<PathBuf>,
    private_files: Vec<PathBuf>,
    protection: Protection,
    tests: TestPlan,
    room: Option<RoomAhead>,
    tree: git2::Oid,
    commit: git2::Oid,
}

impl BaseTest {
    /// None where the base's tree cannot be found.
    fn of(plan: &RunPlan) -> Option<BaseTest> {
        let tree = plan.repo.find_commit(plan.base.id).ok()?.tree_id();
        Some(BaseTest {
            mode: plan.sandbox,
            allow_write: plan.allow_write.clone(),
            allow_read: plan.allow_read.clone(),
            common_dir: plan.repo.commondir().to_path_buf(),
            user_workdir: plan.repo.workdir().map(std::path::Path::to_path_buf),
            private_files: plan.private_files.clone(),
            protection: plan.protection.clone(),
            tests: plan.tests.clone(),
            room: plan.room_ahead.take(),
            tree,
            commit: plan.base.id,
        })
    }

    /// One test run of the base's tree in a clean room of its own, with no work tree
    /// anywhere: the result, the sandbox as the report names it, the time the tests took, and
    /// the room for the next tester.
    fn run(
        mut self,
        interrupt: &AtomicBool,
        waiting: Waiting,
    ) -> Result<(TestResult, String, Duration, RoomAhead), String> {
        let helper = std::env::current_exe()
            .map_err(|e| format!("cannot find agent-git's own binary: {e}"))?;
        let work = tempfile::Builder::new()
            .prefix("agent-git-check-")
            .tempdir()
            .map_err(|e| format!("cannot make a temp dir: {e}"))?;
        // Held while it lives: what a run that dies leaves here, the next run's sweep removes.
        let _lease = crate::leftovers::Lease::take(&work.path().join(crate::leftovers::LEASE))
            .map_err(|e| format!("cannot make a temp dir: {e}"))?;
        let sandbox = Sandbox::start(
            self.mode,
            helper,
            work.path(),
            Limits::default(),
            Reach {
                allow_write: self.allow_write.clone(),
                allow_read: self.allow_read.clone(),
                readable: Vec::new(),
                hidden: config_with_credentials(&self.common_dir),
            },
        )
        .map_err(|e| format!("cannot set up the sandbox: {e}"))?;
        let setup = TestSetup {
            protection: &self.protection,
            plan: &self.tests,
            sandbox: &sandbox,
            interrupt,
            waiting,
        };
        let unreadable = Unreadable {
            user_workdir: self.user_workdir.as_deref(),
            private_files: &self.private_files,
        };
        let objects = self.common_dir.join("objects");
        let tester = TreeTester::new(&objects, None, setup, unreadable, self.room.take())
            .map_err(|e| format!("cannot set up the clean room: {e}"))?;
        let result = tester
            .test(self.tree, Some(self.commit))
            .map_err(|e| format!("the tests could not run: {e}"))?;
        let room = RoomAhead::handed_on(tester);
        Ok((result, sandbox.describe(), sandbox.busy(), room))
    }
}

/// Where a run's time went, in `--json`: the model, the confined processes (tests, setup,
/// commands, hooks), and the rest, the harness's own (`harness_secs`).
fn add_timing(
    json: &mut Value,
    wall: std::time::Duration,
    model: std::time::Duration,
    processes: std::time::Duration,
) {
    let harness = wall.saturating_sub(model).saturating_sub(processes);
    let secs = |d: std::time::Duration| (d.as_secs_f64() * 1000.0).round() / 1000.0;
    json["timing"] = json!({
        "wall_secs": secs(wall),
        "model_secs": secs(model),
        "processes_secs": secs(processes),
    });
    json["harness_secs"] = json!(secs(harness));
}

/// Which of the repository's commit hooks agent commits run, if it has any: none with
/// `--no-verify`, nor without a sandbox to run them in.
fn hooks_note(workspace: &Workspace, asked: bool, run: bool) -> Option<String> {
    let present: Vec<&str> = crate::workspace::COMMIT_HOOKS
        .into_iter()
        .filter(|hook| workspace.hook_path(hook).is_some())
        .collect();
    if present.is_empty() {
        return None;
    }
    let hooks = present.join(" and ");
    Some(match (asked, run) {
        (true, true) => {
            format!("commit hooks: {hooks} ran on each agent commit, as the model's commands run")
        }
        (true, false) => format!("commit hooks not run (no sandbox to run them in): {hooks}"),
        (false, _) => format!("commit hooks skipped (--no-verify): {hooks}"),
    })
}

/// Nothing was asked of the model (the tests already pass, or cannot run at all): the run
/// leaves no trace, neither work tree nor branch, and says why.
fn finish_without_branch(
    plan: &RunPlan,
    workspace: Workspace,
    slot: Option<Slot>,
    result: RunResult,
    sandbox: &str,
) -> Result<Finished, RunError> {
    pool::discard(workspace, slot)
        .map_err(|e| RunError::Harness(format!("cannot remove the run's branch: {e}")))?;
    Ok(answer_without_branch(plan, &result, sandbox))
}

/// What `--if-failing` learns of the base before any branch or work tree exists.
enum Before {
    /// The tests pass, or cannot run: the whole answer, and the time its test run took.
    Answered(Finished, Duration),
    /// They fail: the run goes on, and this is its result before any change.
    Failing(Baseline),
    /// The tests could not be set up here: the run finds out as it always did.
    Unknown,
}

/// `--if-failing` answered before any checkout: from the record of an earlier pass of the
/// base's tree with the same set-up, else by testing that tree in a clean room, where a pass
/// is recorded for the next time.
fn answer_before_checkout(
    plan: &RunPlan,
    interrupt: &AtomicBool,
    progress: &mut dyn FnMut(&str),
    waiting: Waiting,
) -> Before {
    progress(&format!("tests: {}", plan.tests.describe()));
    let Ok(tree) = plan.repo.find_commit(plan.base.id).map(|c| c.tree_id()) else {
        return Before::Unknown;
    };
    if let Some(summary) = &plan.passed_before {
        progress("this tree passed before with the same test set-up; nothing runs");
        return Before::Answered(passed_before(plan, summary), Duration::ZERO);
    }
    let (result, sandbox, processes) = match test_base(plan, interrupt, waiting) {
        Ok(tested) => tested,
        Err(why) => {
            progress(&why);
            return Before::Unknown;
        }
    };
    progress(&format!("tests before any change: {}", result.summary()));
    let protected = |path: &str| plan.protection.is_protected(std::path::Path::new(path));
    let outcome = match plan.tests.cannot_run(&result, &protected) {
        Some(why) => {
            progress(&format!(
                "the tests cannot run, so no model is called: {why}"
            ));
            Outcome::TestsCannotRun(why)
        }
        None if result.passed => {
            let entry = Tested {
                detail: None,
                identity: plan.tested_as.clone(),
                verdict: "passed".into(),
                command: plan.tests.label.clone(),
                summary: result.summary(),
                commit: plan.base.id.to_string(),
            };
            if let Err(e) = record_tested(&plan.repo, tree, entry) {
                progress(&format!("could not keep the pass of the base: {e}"));
            }
            Outcome::AlreadyPassing
        }
        None => {
            return Before::Failing(Baseline {
                result,
                processes,
                sandbox,
            })
        }
    };
    let run = RunResult::before_the_model(outcome, result);
    let finished = answer_without_branch(plan, &run, &sandbox);
    Before::Answered(finished, processes)
}

/// The answer when the base's tree passed before with the same set-up: nothing runs.
fn passed_before(plan: &RunPlan, summary: &str) -> Finished {
    let mut tests = TestResult::not_run(&plan.tests.label, "");
    (tests.ran, tests.passed, tests.exit_code) = (true, true, Some(0));
    tests.cached = true;
    let result = RunResult::before_the_model(Outcome::AlreadyPassing, tests);
    let mut finished = answer_without_branch(plan, &result, "not started (nothing ran)");
    finished.json["tests"]["summary"] = json!(summary);
    finished.message = format!(
        "agent-git: the tests already pass at {} ({summary}; this tree passed before with the \
         same set-up, nothing ran); nothing to do, no branch kept\n",
        &plan.base.id.to_string()[..7],
    );
    finished
}

/// `BaseTest::run` for the plan, whose room it takes and gives back.
fn test_base(
    plan: &RunPlan,
    interrupt: &AtomicBool,
    waiting: Waiting,
) -> Result<(TestResult, String, Duration), String> {
    let test = BaseTest::of(plan).ok_or("the base's tree cannot be found")?;
    let (result, sandbox, processes, room) = test.run(interrupt, waiting)?;
    plan.room_ahead.set(Some(room));
    Ok((result, sandbox, processes))
}

/// The report of a run that asked nothing of the model and keeps no branch.
fn answer_without_branch(plan: &RunPlan, result: &RunResult, sandbox: &str) -> Finished {
    let labels = Labels::of(plan);
    let report = report(plan, &labels, result, &[], sandbox);
    let message = match &result.outcome {
        Outcome::AlreadyPassing => format!(
            "agent-git: the tests already pass at {} ({}); nothing to do, no branch kept\n",
            &plan.base.id.to_string()[..7],
            result.tests.summary()
        ),
        _ => report.message(),
    };
    Finished {
        json: report.json(&[], None, None),
        outcome: result.outcome.clone(),
        message,
    }
}

/// Ctrl-C (SIGINT) or SIGTERM sets `flag`: the run stops at the next step and still writes its
/// report. A signal that comes within `SAME_SIGNAL` of the first is the same one sent twice
/// (GNU `timeout -s INT` signals the command and then its process group; a key held down);
/// a later second one leaves the run `REPORT_GRACE` to write its report before it exits, and a
/// third exits at once. The user's checkout is safe either way, and a run that ended without
/// its report is still listed by `runs` (outcome `no-report`). The handlers are installed
/// before this returns, so no early signal slips past. `first` is said on the first signal.
pub fn watch_signals(
    runtime: &tokio::runtime::Runtime,
    flag: Arc<AtomicBool>,
    first: Option<&'static str>,
) -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let _context = runtime.enter();
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    // A closed terminal or a dropped ssh session: the run still writes its report.
    let mut hangup = signal(SignalKind::hangup())?;
    runtime.spawn(async move {
        let mut first_at: Option<std::time::Instant> = None;
        let mut hurried = false;
        loop {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
                _ = hangup.recv() => {}
            }
            match first_at {
                None if !flag.swap(true, Ordering::SeqCst) => {
                    first_at = Some(std::time::Instant::now());
                    if let Some(first) = first {
                        eprintln!("{first}");
                    }
                }
                // Interrupted already by another path (the run set the flag itself).
                None => first_at = Some(std::time::Instant::now()),
                Some(at) if at.elapsed() < SAME_SIGNAL => {}
                Some(_) if !hurried => {
                    hurried = true;
                    eprintln!(
                        "agent-git: stopping now; the report is being written (once more to \
                         quit without it)"
                    );
                    std::thread::spawn(|| {
                        std::thread::sleep(REPORT_GRACE);
                        std::process::exit(130);
                    });
                }
                Some(_) => std::process::exit(130),
            }
        }
    });
    Ok(())
}

/// Two signals closer than this are one interrupt sent twice.
const SAME_SIGNAL: Duration = Duration::from_millis(500);

/// How long a run has after a second interrupt to write its report.
const REPORT_GRACE: Duration = Duration::from_secs(3);

/// Takes the run's clean room, then lets the agent work in the confinement the start set up.
/// Whatever fails here (that set-up included) still ends in a report: a harness error, before
/// the model was asked anything.
fn run_in(
    plan: &mut RunPlan,
    workspace: &Workspace,
    set_up: SetUp,
    interrupt: &AtomicBool,
    progress: &mut dyn FnMut(&str),
    waiting: Waiting,
    runtime: &tokio::runtime::Runtime,
) -> Result<(RunResult, String), RunError> {
    let worked = work(
        plan, workspace, set_up, interrupt, progress, waiting, runtime,
    );
    let (result, sandbox) = match worked {
        Ok(done) => done,
        Err(RunError::Harness(why)) => {
            progress(&why);
            let tests = crate::testrun::TestResult::not_run(&plan.tests.label, &why);
            let result = RunResult::before_the_model(Outcome::HarnessError(why), tests);
            (result, "not started".to_string())
        }
        Err(e) => return Err(e),
    };
    if let Some(path) = &plan.transcript {
        // A transcript that cannot be written must not cost the user the report.
        if let Err(e) = write_transcript(path, &transcript(&plan.system, &result)) {
            progress(&format!(
                "cannot write the transcript {}: {e}",
                path.display()
            ));
        }
    }
    Ok((result, sandbox))
}

fn work(
    plan: &mut RunPlan,
    workspace: &Workspace,
    SetUp {
        confined,
        baseline,
        asked,
    }: SetUp,
    interrupt: &AtomicBool,
    progress: &mut dyn FnMut(&str),
    waiting: Waiting,
    runtime: &tokio::runtime::Runtime,
) -> Result<(RunResult, String), RunError> {
    let harness = |e: &dyn std::fmt::Display| RunError::Harness(e.to_string());
    let Confinement { guard, sandbox } = confined.map_err(RunError::Harness)?;
    progress(&format!("sandbox: {}", sandbox.describe()));
    if plan.verbose {
        progress(&format!("sandbox, in full: {}", sandbox.details()));
    }
    let hooks_run = plan.run_hooks && sandbox.refusal().is_none();
    plan.notes
        .extend(hooks_note(workspace, plan.run_hooks, hooks_run));
    let setup = TestSetup {
        protection: &plan.protection,
        plan: &plan.tests,
        sandbox: &sandbox,
        interrupt,
        waiting,
    };
    let unreadable = Unreadable {
        user_workdir: plan.repo.workdir(),
        private_files: &plan.private_files,
    };
    let verifier = Verifier::new(workspace, setup, unreadable, plan.room_ahead.take())
        .map_err(|e| harness(&format!("cannot set up the clean room: {e}")))?;
    let mut before = Duration::ZERO;
    // Taken in a sandbox of its own, it counts where that one confined as the run's does.
    if let Some(tested) = baseline.filter(|b| b.sandbox == sandbox.describe()) {
        verifier.adopt_baseline(tested.result);
        before = tested.processes;
    }
    let registry = Registry::builtin();
    let tools = registry.specs();
    let nobody = |_: &str| None;
    let ask: &dyn Fn(&str) -> Option<String> = if plan.interactive {
        &ask_at_terminal
    } else {
        &nobody
    };
    let asking = move || {
        if let Some(go) = &asked {
            let _ = go.send(());
        }
    };
    let agent = Agent {
        model: plan.model.as_mut(),
        asking: &asking,
        registry: &registry,
        guard: &guard,
        verifier: &verifier,
        system: &plan.system,
        brief: &plan.brief,
        ask,
        run_hooks: plan.run_hooks,
        budget: plan.budget,
        interrupt,
        progress,
        events: match plan.events.as_mut() {
            Some(events) => events.as_mut(),
            None => &mut |_| {},
        },
        only_if_failing: plan.only_if_failing,
        resume: plan.resume.take(),
    };
    let mut result = runtime.block_on(agent.run(&plan.task, &tools));
    if result.outcome == crate::agent::Outcome::Passed {
        result.proof = verifier.prove_changes(plan.prove, progress);
    }
    result.process_time = sandbox.busy() + before;
    result.sandbox_details = Some(sandbox.details());
    let not_run = verifier.python_files_not_run(&plan.tests.facts.python_test_files);
    if !not_run.is_empty() {
        let note = format!(
            "protected, not run by `{}`: {}",
            plan.tests.label,
            not_run.join(", ")
        );
        progress(&note);
        plan.notes.push(note);
    }
    Ok((result, sandbox.describe()))
}

/// Shows the model's question on stderr and reads one line of answer from the terminal.
fn ask_at_terminal(question: &str) -> Option<String> {
    use std::io::{BufRead, Write};
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "agent-git: the model asks: {}\nagent-git: your answer (one line; empty for none): ",
        crate::text::for_terminal(question)
    );
    let _ = err.flush();
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer).ok()?;
    Some(answer.trim().to_string())
}

/// The whole conversation (system, tools, messages): the file of `--transcript` and the note
/// on the report commit. The API key is never part of it.
pub fn transcript(system: &str, result: &RunResult) -> Value {
    let tools = Registry::builtin().specs();
    json!({"system": system, "tools": tools, "messages": result.messages})
}

fn write_transcript(path: &std::path::Path, transcript: &Value) -> std::io::Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(transcript)?)
}

/// What the report says of the plan that is not kept as text in it.
struct Labels {
    model: String,
    base: String,
    notes: Vec<String>,
}

impl Labels {
    fn of(plan: &RunPlan) -> Self {
        Labels {
            model: plan.model.label(),
            base: plan.base.id.to_string(),
            notes: [plan.notes.clone(), plan.model.notes()].concat(),
        }
    }
}

/// The report of a run: one builder for the commit message, stdout and `--json`.
fn report<'a>(
    plan: &'a RunPlan,
    labels: &'a Labels,
    result: &'a RunResult,
    files: &'a [crate::workspace::FileStat],
    sandbox: &'a str,
) -> Report<'a> {
    Report {
        run_id: &plan.run_id,
        task: &plan.task,
        model: &labels.model,
        base: &labels.base,
        base_summary: &plan.base.summary,
        branch: &plan.branch,
        outcome: &result.outcome,
        turns: result.turns,
        max_turns: plan.budget.max_turns,
        actions: &result.actions,
        tests: &result.tests,
        files,
        usage: &result.usage,
        cost: plan.budget.cost(&result.usage),
        max_cost: plan.budget.max_cost,
        max_time: plan.budget.max_time,
        reasoning: plan.reasoning,
        proof: &result.proof,
        notes: &labels.notes,
        sandbox,
        ended_early: result.ended_early.as_deref(),
        test_rules: &plan.tests.rules,
        attempt: plan.attempt.as_ref(),
        sandbox_details: result.sandbox_details.as_deref(),
    }
}

fn write_report(
    plan: &RunPlan,
    workspace: &Workspace,
    result: RunResult,
    sandbox: &str,
    progress: &mut dyn FnMut(&str),
) -> Result<Finished, RunError> {
    let harness = |e: &dyn std::fmt::Display| RunError::Harness(e.to_string());
    let files = workspace.diffstat().map_err(|e| harness(&e))?;
    let labels = Labels::of(plan);
    let report = report(plan, &labels, &result, &files, sandbox);
    let message = report.message();
    let report_commit = workspace.commit_report(&message).map_err(|e| harness(&e))?;
    // Like the file, a note that cannot be stored must not cost the user the report.
    let conversation = transcript(&plan.system, &result);
    if let Err(e) = workspace.store_transcript(report_commit, &conversation) {
        progress(&format!("cannot store the transcript in git: {e}"));
    }
    let commits: Vec<String> = result.commits.iter().map(|c| c.to_string()).collect();
    let worktree = plan
        .keep_worktree
        .then(|| workspace.path().display().to_string());
    let json = report.json(
        &commits,
        Some(&report_commit.to_string()),
        worktree.as_deref(),
    );
    Ok(Finished {
        outcome: result.outcome.clone(),
        message,
        json,
    })
}
