//! The verifier: the only judge of "done". Every test run whose result the harness states runs
//! here, in the clean room: the branch's committed tree with the protected paths of the base,
//! outside the user's checkout, with a fresh HOME and TMPDIR, confined by the sandbox. The run
//! before any change takes the test inventory; every later run is held to it.

pub mod hunks;

use crate::guard::Protection;
use crate::sandbox::{Jail, Sandbox};
use crate::testrun::{
    cases_from_junit, cases_from_results_json, Case, Ended, Inventory, Runner, TestCommand,
    TestPlan, TestResult, BUILTIN_PYTHON_RUNNER,
};
use crate::workspace::export::{self, Archived, Values};
use crate::workspace::{CleanRoom, ProtectedMemo, RunDirs, Workspace, WorkspaceError, OVERLAYS};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Why the tests could not be run at all (a failing test is a result, not an error).
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The clean room could not be made from the tree, or git failed.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// The sandbox could not start the test command.
    #[error("cannot start `{command}`: {source}")]
    Start {
        /// The plan's label for the command.
        command: String,
        /// What the sandbox's start failed with.
        source: std::io::Error,
    },
}

/// What the tests may not read besides the run's own work tree and files: the user's checkout,
/// and files of the run such as the recording of the model's replies.
pub struct Unreadable<'p> {
    /// The user's checkout; None for a bare repository.
    pub user_workdir: Option<&'p Path>,
    /// The run's files that are not the tests' business (the transcript, the recording).
    pub private_files: &'p [PathBuf],
}

/// Which build cache a test run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cache {
    /// The one kept from run to run: fast, but earlier test runs could write to it.
    Shared,
    /// An empty one, to confirm a pass.
    Fresh,
}

/// Whether the runner is asked for a report file (JUnit XML, the built-in runner's JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Report {
    Asked,
    /// The command as anyone would run it: nothing in its environment names a report.
    NotAsked,
}

/// `result`, which does not pass where its run changed the protected entries `changed`: what
/// it passed on is not the tree's tests.
fn not_counted_for(mut result: TestResult, changed: &[PathBuf]) -> TestResult {
    let Some(first) = changed.first() else {
        return result;
    };
    result.passed = false;
    result.changed_protected = changed.iter().map(|p| p.display().to_string()).collect();
    result.tail.push_str(&format!(
        "\nagent-git: the test run changed {} protected tracked entr{} (e.g. {}), which must \
         stay as committed while the tests run: its result does not count\n",
        changed.len(),
        if changed.len() == 1 { "y" } else { "ies" },
        first.display()
    ));
    result
}

/// The clean room of a run, taken and reset to the base's tree in a thread of its own while
/// the rest of the run is set up (the python3 probe, the work tree): on a large tree its
/// checkout is as long as the work tree's.
/// Dropped unused (planning failed), it waits for the thread, and the room keeps no state: a
/// plan that fails writes nothing in the repository, the room's record included.
pub struct RoomAhead(Option<Ahead>);

enum Ahead {
    Making(std::thread::JoinHandle<Result<CleanRoom, WorkspaceError>>),
    /// A room a tester is done with, which knows what it holds, whether that tester's last
    /// run saw it through an overlay of its own, and the protected entries it found in the
    /// trees it tested (for the protection it had).
    Ready(Box<CleanRoom>, bool, ProtectedMemo),
}

impl RoomAhead {
    /// Starts taking the room of the repository whose objects are in `objects`, and resetting
    /// it to `tree`.
    pub fn start(objects: PathBuf, user_workdir: Option<PathBuf>, tree: git2::Oid) -> RoomAhead {
        RoomAhead(Some(Ahead::Making(std::thread::spawn(move || {
            let mut room = CleanRoom::open(&objects, user_workdir.as_deref())?;
            room.reset_ahead(tree)?;
            Ok(room)
        }))))
    }

    /// The room `tester` tested in, for the next tester of the same repository: it goes on
    /// from what it knows it holds, instead of being kept and opened again (which checks
    /// every file of it).
    pub fn handed_on(tester: TreeTester) -> RoomAhead {
        let overlay_held = tester.overlay_held.get();
        RoomAhead(Some(Ahead::Ready(
            Box::new(tester.room.into_inner()),
            overlay_held,
            tester.protected_memo.into_inner(),
        )))
    }

    /// For a tester whose protection is another: what the last one found protected in each
    /// folder is not its to go by.
    pub fn forget_protected(&mut self) {
        if let Some(Ahead::Ready(_, _, memo)) = &mut self.0 {
            *memo = ProtectedMemo::default();
        }
    }

    /// The room, whether the last run in it saw it through an overlay of its own, and the
    /// protected entries found so far.
    fn join(mut self) -> Result<(CleanRoom, bool, ProtectedMemo), VerifyError> {
        let stopped = || WorkspaceError::Unsafe("the clean room's set-up stopped midway".into());
        match self.0.take().ok_or_else(stopped)? {
            Ahead::Making(thread) => Ok((
                thread.join().map_err(|_| stopped())??,
                false,
                ProtectedMemo::default(),
            )),
            Ahead::Ready(room, overlay_held, memo) => Ok((*room, overlay_held, memo)),
        }
    }
}

impl Drop for RoomAhead {
    fn drop(&mut self) {
        // A room reset ahead for a test that never came keeps no state; one a tester is
        // done with is kept as its drop keeps it.
        if let Some(Ahead::Making(thread)) = self.0.take() {
            if let Ok(Ok(mut room)) = thread.join() {
                room.keep_nothing();
            }
        }
    }
}

/// Hears how long a test run has been going, while it goes (the CLI shows it on stderr).
pub type Waiting<'a> = &'a dyn Fn(&str, Duration);

/// The judge of a run: tests the run's branch in the clean room, the run before any change
/// taking the inventory that every later run is held to.
pub struct Verifier<'a> {
    /// The run's work tree and branch; its committed tree is what is tested.
    pub workspace: &'a Workspace,
    /// How the tests are run.
    pub plan: &'a TestPlan,
    /// Confines the test command (and, through the tools, the model's commands).
    pub sandbox: &'a Sandbox,
    /// Set when the run is interrupted: a test run under way is stopped.
    pub interrupt: &'a AtomicBool,
    tester: TreeTester<'a>,
    inventory: RefCell<Option<Inventory>>,
    /// Each tree tested in this run and its result (before the inventory is applied): a
    /// tree is never tested twice.
    tested: RefCell<std::collections::HashMap<git2::Oid, TestResult>>,
    /// The base's result, when it was tested before the work tree existed.
    adopted: RefCell<Option<TestResult>>,
    /// The parametrized test functions whose ids a second run of the base showed to change
    /// from run to run; None until a run needs to know.
    unstable: RefCell<Option<Vec<String>>>,
    /// How long each tree's test run took.
    took: RefCell<HashMap<git2::Oid, Duration>>,
}

/// When proving a passed run's changes is worth a test run per change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProveLimits {
    /// Forced on or off by the user; None decides by the bounds below.
    pub asked: Option<bool>,
    /// More changes than this are not proven (each costs a test run); 8 by default.
    pub max_changes: usize,
    /// A test run of the branch longer than this is not repeated per change; 30 s by default.
    pub max_test_run: Duration,
}

impl Default for ProveLimits {
    fn default() -> Self {
        ProveLimits {
            asked: None,
            max_changes: 8,
            max_test_run: Duration::from_secs(30),
        }
    }
}

/// What leaving each change of a passed run out alone showed.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Proof {
    /// Not tried: the run did not pass, or proving was turned off.
    #[default]
    NotRun,
    /// Not tried, for the reason given.
    Skipped {
        /// Why, in the words the report shows.
        why: String,
    },
    /// Each change left out alone and the tests run again.
    Proven {
        /// The tree the changes lead to (the branch as the tests judged it).
        tree: String,
        /// Each change, in the order of the diff.
        changes: Vec<Proven>,
        /// The time the proof took, in seconds.
        secs: f64,
        /// One test run of the branch, in seconds, to compare `secs` with.
        one_test_run_secs: f64,
    },
}

/// One change and whether the tests need it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Proven {
    /// Where the change is and its size.
    #[serde(flatten)]
    pub change: hunks::Change,
    /// False when every test still passes without it.
    pub required: bool,
}

impl<'a> Verifier<'a> {
    /// Takes the clean room (outside the user's checkout: the one made `ahead`, if any) and
    /// puts the built-in runner beside it.
    pub fn new(
        workspace: &'a Workspace,
        setup: TestSetup<'a>,
        unreadable: Unreadable,
        ahead: Option<RoomAhead>,
    ) -> Result<Self, VerifyError> {
        let (plan, sandbox, interrupt) = (setup.plan, setup.sandbox, setup.interrupt);
        let tester = TreeTester::new(
            &workspace.objects_dir(),
            Some(workspace.path()),
            setup,
            unreadable,
            ahead,
        )?;
        Ok(Verifier {
            workspace,
            plan,
            sandbox,
            interrupt,
            tester,
            inventory: RefCell::new(None),
            tested: RefCell::new(std::collections::HashMap::new()),
            adopted: RefCell::new(None),
            unstable: RefCell::new(None),
            took: RefCell::new(HashMap::new()),
        })
    }

    /// The base's result from a test run before the work tree existed (`fix --if-failing`):
    /// `baseline` takes it instead of testing the base a second time.
    pub fn adopt_baseline(&self, result: TestResult) {
        *self.adopted.borrow_mut() = Some(result);
    }

    /// The run before any change: the tests it names become the inventory.
    pub fn baseline(&self) -> Result<TestResult, VerifyError> {
        // The base's tree, also when a resumed run starts from a branch with edits on it.
        let adopted = self.adopted.borrow_mut().take();
        let mut result = match adopted {
            Some(result) => {
                let base = self.workspace.base_tree()?;
                self.tested.borrow_mut().insert(base, result.clone());
                result
            }
            None => self.test_once(self.workspace.base_tree()?, self.workspace.base)?,
        };
        let inventory = Inventory::of(&result);
        result.checked = inventory
            .as_ref()
            .map_or(crate::testrun::Checked::ByExitCode, Inventory::method);
        *self.inventory.borrow_mut() = inventory;
        Ok(result)
    }

    /// A run of the branch as it is now, held to the inventory.
    pub fn run(&self) -> Result<TestResult, VerifyError> {
        let tree = self
            .workspace
            .verification_tree(self.tester.setup.protection)?;
        let mut result = self.test_once(tree, self.workspace.head()?)?;
        let mut unstable = |functions: &[String]| self.unstable_among(functions);
        Inventory::check_with(self.inventory.borrow().as_ref(), &mut result, &mut unstable);
        Ok(result)
    }

    /// For a branch whose tests pass: each change from the base (a hunk, or a file change
    /// taken whole) left out alone, and the tests run again in the clean room, held to the
    /// inventory. A change without which every test still passes is not required by the
    /// tests. Bounded by `limits`; `said` hears each verdict.
    pub fn prove_changes(&self, limits: ProveLimits, said: &mut dyn FnMut(&str)) -> Proof {
        let skipped = |why: String| Proof::Skipped { why };
        if limits.asked == Some(false) {
            return skipped("turned off (--no-prove-hunks)".into());
        }
        let started = std::time::Instant::now();
        let found = (|| -> Result<_, VerifyError> {
            let tip = self
                .workspace
                .verification_tree(self.tester.setup.protection)?;
            let base = self.workspace.base_tree()?;
            let repo = self.workspace.repo()?;
            let changes = hunks::changes(repo, base, tip).map_err(WorkspaceError::from)?;
            Ok((tip, base, changes))
        })();
        let (tip, base, changes) = match found {
            Ok(found) => found,
            Err(e) => return skipped(format!("the changes could not be listed: {e}")),
        };
        let one_run = self.took.borrow().get(&tip).copied();
        if limits.asked.is_none() {
            if changes.len() > limits.max_changes {
                return skipped(format!(
                    "{} changes, more than {} (--prove-hunks proves them anyway)",
                    changes.len(),
                    limits.max_changes
                ));
            }
            if one_run.is_none_or(|took| took > limits.max_test_run) {
                return skipped(format!(
                    "a test run takes more than {} s (--prove-hunks proves them anyway)",
                    limits.max_test_run.as_secs()
                ));
            }
        }
        let Ok(head) = self.workspace.head() else {
            return skipped("the branch has no head".into());
        };
        let Ok(repo) = self.workspace.repo() else {
            return skipped("the work tree is not ready".into());
        };
        let mut proven = Vec::new();
        for (i, change) in changes.iter().enumerate() {
            let without = match hunks::tree_without(repo, base, tip, &changes, &[i]) {
                Ok(tree) => tree,
                Err(e) => return skipped(format!("{} cannot be left out alone: {e}", change.file)),
            };
            let mut result = match self.test_once(without, head) {
                Ok(result) => result,
                Err(e) => return skipped(format!("a test run failed to start: {e}")),
            };
            if result.interrupted {
                return skipped("interrupted".into());
            }
            let mut unstable = |functions: &[String]| self.unstable_among(functions);
            Inventory::check_with(self.inventory.borrow().as_ref(), &mut result, &mut unstable);
            // A run that could not tell (it did not run) counts the change as required.
            let required = !(result.ran && result.passed);
            said(&format!(
                "without {} {}: tests {} -> {}",
                change.file,
                change.header,
                result.summary(),
                if required {
                    "required"
                } else {
                    "not required by the tests"
                }
            ));
            proven.push(Proven {
                change: change.clone(),
                required,
            });
        }
        Proof::Proven {
            tree: tip.to_string(),
            changes: proven,
            secs: started.elapsed().as_secs_f64(),
            one_test_run_secs: one_run.unwrap_or_default().as_secs_f64(),
        }
    }

    /// Which of `functions` change their parameter ids from run to run of the same tree: the
    /// base is tested once more (once a run) and its ids compared with the inventory's. A base
    /// that cannot be tested again confirms none.
    fn unstable_among(&self, functions: &[String]) -> Vec<String> {
        let mut known = self.unstable.borrow_mut();
        if known.is_none() {
            let again = self
                .workspace
                .base_tree()
                .ok()
                .and_then(|base| self.tester.test_anew(base, Some(self.workspace.base)).ok())
                .and_then(|result| result.cases);
            let inventory = self.inventory.borrow();
            *known = Some(match (again, inventory.as_ref()) {
                (Some(cases), Some(inventory)) => inventory.unstable_functions(&cases),
                _ => Vec::new(),
            });
        }
        let unstable = known.as_deref().unwrap_or_default();
        functions
            .iter()
            .filter(|f| unstable.contains(f))
            .cloned()
            .collect()
    }

    /// `tree`'s result: from the run that tested it before, if one did, else from a new one.
    /// An interrupted run, or one that could not start the tests, is not kept.
    fn test_once(&self, tree: git2::Oid, commit: git2::Oid) -> Result<TestResult, VerifyError> {
        if let Some(earlier) = self.tested.borrow().get(&tree) {
            return Ok(TestResult {
                cached: true,
                ..earlier.clone()
            });
        }
        let started = std::time::Instant::now();
        let result = self.tester.test(tree, Some(commit))?;
        if result.ran && !result.interrupted {
            self.tested.borrow_mut().insert(tree, result.clone());
            self.took.borrow_mut().insert(tree, started.elapsed());
        }
        Ok(result)
    }

    /// The Python test files of `files` (the base's) that the inventory names no test of:
    /// protected, yet not run by the test command.
    pub fn python_files_not_run<'f>(&self, files: &'f [String]) -> Vec<&'f str> {
        self.inventory
            .borrow()
            .as_ref()
            .map_or(Vec::new(), |i| i.python_files_not_run(files))
    }

    /// Why `result`, the run before any change, shows that the tests cannot run as they are;
    /// a file this run protects is among what the model could never fix.
    pub fn cannot_run(&self, result: &TestResult) -> Option<String> {
        let protection = self.tester.setup.protection;
        self.plan
            .cannot_run(result, &|path| protection.is_protected(Path::new(path)))
    }

    /// How many tests the inventory holds (0 when no names could be read).
    pub fn inventory_size(&self) -> usize {
        self.inventory.borrow().as_ref().map_or(0, Inventory::len)
    }
}

/// What a clean-room test run is made of: the plan, what it must not change, where it runs.
pub struct TestSetup<'a> {
    /// The protected paths, put back as the base has them before every run.
    pub protection: &'a Protection,
    /// How the tests are run.
    pub plan: &'a TestPlan,
    /// Confines the test command.
    pub sandbox: &'a Sandbox,
    /// Set when the run is interrupted: a test run under way is stopped.
    pub interrupt: &'a AtomicBool,
    /// Hears how long a test run has been going.
    pub waiting: Waiting<'a>,
}

/// What an archived tree is made from: the tree, the commit it is archived as, and the values
/// export-subst writes.
type ArchiveKey = (git2::Oid, Option<git2::Oid>, Values);

/// Tests trees in one clean room: a tree's files (tracked only), outside the user's checkout,
/// with a fresh HOME and TMPDIR, confined by the sandbox. The verifier tests a run's branch
/// with it; `agent-git check` a pushed commit.
pub struct TreeTester<'a> {
    setup: TestSetup<'a>,
    room: RefCell<CleanRoom>,
    runner_script: PathBuf,
    /// What the tests may not read: the user's checkout and git dir, the model's work tree
    /// and private files; and the toolchain paths inside them they may.
    hidden: Vec<PathBuf>,
    shown: Vec<PathBuf>,
    /// The protected entries of the folders of trees tested before.
    protected_memo: RefCell<ProtectedMemo>,
    /// Whether the last test run saw the tree through an overlay of its own.
    overlay_held: std::cell::Cell<bool>,
    /// The repository whose trees are tested, for what an archive of them holds.
    source: git2::Repository,
    /// The archived tree of each (tree, commit, values) asked before.
    archived: RefCell<HashMap<ArchiveKey, Archived>>,
}

impl<'a> TreeTester<'a> {
    /// Takes the clean room for the repository whose objects are in `objects` (the one made
    /// `ahead`, if any), and puts the built-in runner beside it. `work_tree` is a run's work
    /// tree, hidden from the tests.
    pub fn new(
        objects: &Path,
        work_tree: Option<&Path>,
        setup: TestSetup<'a>,
        unreadable: Unreadable,
        ahead: Option<RoomAhead>,
    ) -> Result<Self, VerifyError> {
        let Unreadable {
            user_workdir,
            private_files,
        } = unreadable;
        let (room, overlay_held, memo) = match ahead {
            Some(ahead) => ahead.join()?,
            None => (
                CleanRoom::open(objects, user_workdir)?,
                false,
                ProtectedMemo::default(),
            ),
        };
        let runner_script = room.root().join("agent_git_runner.py");
        crate::workspace::write_new(&runner_script, BUILTIN_PYTHON_RUNNER.as_bytes())?;
        // The clean room's own git dir (its alternates name the repository) and the folders
        // of other test runs are not the tests' business either.
        let room_git = room.root().join("git");
        let room_runs = room.root().join("runs");
        let hidden: Vec<PathBuf> = [
            user_workdir,
            objects.parent(),
            work_tree,
            Some(setup.sandbox.private_dir()),
            Some(room_git.as_path()),
            Some(room_runs.as_path()),
        ]
        .into_iter()
        .flatten()
        .chain(private_files.iter().map(PathBuf::as_path))
        .filter_map(|p| p.canonicalize().ok())
        .collect();
        let mut shown = toolchain_paths(std::env::vars(), &hidden);
        shown.extend(setup.plan.node_modules.iter().cloned());
        shown.extend(setup.plan.venv.iter().cloned());
        let git_dir = objects.parent().unwrap_or(objects);
        let source = git2::Repository::open_bare(git_dir).map_err(WorkspaceError::from)?;
        Ok(TreeTester {
            source,
            archived: RefCell::new(HashMap::new()),
            setup,
            room: RefCell::new(room),
            runner_script,
            hidden,
            shown,
            protected_memo: RefCell::new(memo),
            overlay_held: std::cell::Cell::new(overlay_held),
        })
    }

    /// One test run of `tree`, and for a pass that stood on state earlier runs left (a build
    /// cache they wrote, what the setup command made from another tree), one more from
    /// scratch: that is the one that counts. A pass a report file claimed is confirmed by
    /// the command run as anyone would run it.
    /// `tree` is tested as an archive of `commit` holds it (`workspace::export`): what
    /// `git archive` leaves out is not in the clean room, and the original tests are.
    pub fn test(
        &self,
        tree: git2::Oid,
        commit: Option<git2::Oid>,
    ) -> Result<TestResult, VerifyError> {
        self.test_as_archived(tree, commit, &|t| self.test_archived(t))
    }

    /// `test` run on the tree an archive of `commit` holds, held to other export-subst
    /// values where it passed on the commit's.
    fn test_as_archived(
        &self,
        tree: git2::Oid,
        commit: Option<git2::Oid>,
        test: &dyn Fn(git2::Oid) -> Result<TestResult, VerifyError>,
    ) -> Result<TestResult, VerifyError> {
        let archived = self.archived(tree, commit, Values::OfCommit)?;
        let result = test(archived.tree)?;
        self.held_with_other_values(tree, commit, archived, result, test)
    }

    /// The tree an archive of `commit` (or of `tree` alone) holds, with the protected files.
    fn archived(
        &self,
        tree: git2::Oid,
        commit: Option<git2::Oid>,
        values: Values,
    ) -> Result<Archived, VerifyError> {
        if let Some(known) = self.archived.borrow().get(&(tree, commit, values)) {
            return Ok(*known);
        }
        let protection = self.setup.protection;
        let keep = |path: &Path| protection.is_protected(path);
        let exported = export::archived(&self.source, tree, commit, &keep, values)?;
        self.archived
            .borrow_mut()
            .insert((tree, commit, values), exported);
        Ok(exported)
    }

    /// `result`, a pass of `archived`, if it also passes where `export-subst` wrote other
    /// values than the tested commit's: an archive of the branch is made from another commit
    /// (the report's, the applied one), so a pass that stands on those values would not hold
    /// there. Else the run with the other values, which says why.
    fn held_with_other_values(
        &self,
        tree: git2::Oid,
        commit: Option<git2::Oid>,
        archived: Archived,
        result: TestResult,
        test: &dyn Fn(git2::Oid) -> Result<TestResult, VerifyError>,
    ) -> Result<TestResult, VerifyError> {
        if !result.passed || !archived.from_commit {
            return Ok(result);
        }
        let other = self.archived(tree, commit, Values::Other)?;
        let mut again = test(other.tree)?;
        if again.passed || !again.ran || again.interrupted {
            return Ok(result);
        }
        again.tail.push_str(
            "\nagent-git: the tests passed with what export-subst writes from the tested commit \
             and fail with other values of the same shape: an archive of the branch is made \
             from another commit, so that pass would not hold there\n",
        );
        Ok(again)
    }

    fn test_archived(&self, tree: git2::Oid) -> Result<TestResult, VerifyError> {
        if self.pair_at_once() {
            if let Some(result) = self.test_pair(tree)? {
                return Ok(result);
            }
        }
        let cached = self.uses_build_cache() && self.room.borrow().cache_was_written();
        let mut result = self.test_once(tree, Cache::Shared, Report::Asked)?;
        let stale_setup = self.room.borrow().setup_is_stale();
        if result.passed && (cached || stale_setup) {
            self.room.borrow_mut().clear_setup()?;
            result = self.test_once(tree, Cache::Fresh, Report::Asked)?;
            if self.uses_build_cache() {
                self.room.borrow_mut().adopt_fresh_cache()?;
            }
        }
        if result.passed && self.reports_through_files() {
            // The report file is written by the very process that runs the code under test,
            // which can also see that it was asked for: the pass stands only if the command,
            // run as anyone would run it, succeeds too.
            let plain = self.test_once(tree, Cache::Shared, Report::NotAsked)?;
            return Ok(self.confirmed(result, plain));
        }
        Ok(result)
    }

    /// The verdict on a pass a report file claimed, given the plain run of the same tree: the
    /// pass, if the plain run passed too and printed what it ran; else the plain run, disputed.
    fn confirmed(&self, reported: TestResult, plain: TestResult) -> TestResult {
        if !plain.passed {
            return plain.disputed();
        }
        match self.unbacked_by_plain_run(&reported, &plain) {
            Some(why) => plain.disputed_by(&why),
            None => reported,
        }
    }

    /// The result of the raw run `raw` in the tree at `tree`, with the cases its report
    /// files named.
    fn result_of(
        &self,
        raw: crate::sandbox::RawRun,
        tree: &Path,
        cases: Option<Vec<Case>>,
    ) -> TestResult {
        let ended = Ended {
            exit_code: raw.exit_code,
            timed_out: raw.timed_out,
            interrupted: raw.interrupted,
        };
        let output = self.plain_paths(&raw.output, tree);
        TestResult::read(self.setup.plan, &output, ended, cases)
    }

    /// Whether a run and the plain one that would confirm its pass may go at once: each sees
    /// the same tree through an overlay of its own (the last run's held), with a network, a
    /// HOME and a TMPDIR of its own, and there is a second core for it. Not with a setup
    /// command or a build cache, which both would write for real, nor where the user made a
    /// folder writable, which both would share.
    fn pair_at_once(&self) -> bool {
        self.reports_through_files()
            && !self.uses_build_cache()
            && self.setup.sandbox.allowed_writes().is_empty()
            && self.setup.plan.setup.is_none()
            && self.overlay_held.get()
            && self.setup.sandbox.confines()
            && std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
    }

    /// `test` as two runs at once (see `pair_at_once`): the one asked for a report and the
    /// plain one, which stops as soon as the first fails. None where the pair cannot stand
    /// (an overlay did not hold, or refused a rename) or the first failed: `test` then runs
    /// them in turn, so a failure is always that of a run alone.
    fn test_pair(&self, tree: git2::Oid) -> Result<Option<TestResult>, VerifyError> {
        let mut room = self.room.borrow_mut();
        room.reset_to(tree)?;
        let command = self.setup.plan.command_line(&self.runner_script);
        let (asked_dirs, plain_dirs) = (room.run_dirs()?, room.run_dirs()?);
        let (asked_upper, plain_upper) = (
            room.fresh_overlay(OVERLAYS[0])?,
            room.fresh_overlay(OVERLAYS[1])?,
        );
        let asked_jail = self.jail(&room, &asked_dirs, None, Report::Asked, Some(&asked_upper))?;
        let plain_jail = self.jail(
            &room,
            &plain_dirs,
            None,
            Report::NotAsked,
            Some(&plain_upper),
        )?;
        let stop = AtomicBool::new(false);
        let label = self.setup.plan.label.as_str();
        let mut waiting = |elapsed: Duration| (self.setup.waiting)(label, elapsed);
        let (busy, started) = (self.setup.sandbox.busy(), std::time::Instant::now());
        let (asked, plain) = std::thread::scope(|scope| {
            let (sandbox, plan) = (self.setup.sandbox, self.setup.plan);
            let plain = scope
                .spawn(|| run_confined(sandbox, plan, &plain_jail, &command, &stop, &mut |_| {}));
            let asked = self.run_jail(&asked_jail, &command, self.setup.interrupt, &mut waiting);
            let seq = std::sync::atomic::Ordering::SeqCst;
            if !asked.as_ref().is_ok_and(|raw| raw.exit_code == Some(0)) {
                stop.store(true, seq);
            }
            // A Ctrl-C while the plain run goes on stops it too.
            while !plain.is_finished() {
                if self.setup.interrupt.load(seq) {
                    stop.store(true, seq);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let plain = plain.join().unwrap_or_else(|_| {
                Err(VerifyError::Workspace(WorkspaceError::Unsafe(
                    "the confirming test run stopped midway".into(),
                )))
            });
            (asked, plain)
        });
        // The two ran at once: their time together is the span, not the sum.
        let counted = self.setup.sandbox.busy().saturating_sub(busy);
        let sandbox = self.setup.sandbox;
        sandbox.counted_twice(counted.saturating_sub(started.elapsed()));
        let held = [&asked_upper, &plain_upper]
            .iter()
            .all(|upper| upper.join(crate::sandbox::OVERLAY_HELD).exists());
        let changed: Vec<PathBuf> = [&asked_upper, &plain_upper]
            .iter()
            .flat_map(|upper| self.protected_changes(upper, tree))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        for name in OVERLAYS {
            room.remove_overlay(name)?;
        }
        let results = (
            read_result_files(&asked_dirs.results),
            read_result_files(&plain_dirs.results),
        );
        asked_dirs.remove()?;
        plain_dirs.remove()?;
        self.overlay_held.set(held);
        let (asked, plain) = (asked?, plain?);
        let exdev =
            |raw: &crate::sandbox::RawRun| raw.exit_code != Some(0) && crosses_devices(&raw.output);
        if !held || exdev(&asked) || exdev(&plain) {
            // What the runs wrote, if it reached the tree, is undone at the next reset.
            return Ok(None);
        }
        if self.room_out_of_reach(&room) {
            room.left_untouched();
        }
        let asked = self.result_of(asked, room.path(), results.0);
        if !asked.passed {
            // Not on the word of a run that shared the machine with its twin: a failure is
            // the verdict of a run alone.
            return Ok(None);
        }
        let plain = self.result_of(plain, room.path(), results.1);
        Ok(Some(not_counted_for(
            self.confirmed(asked, plain),
            &changed,
        )))
    }

    /// The tracked entries of `tree` that the protection covers and a test run changed,
    /// created or removed, as the upper dir of its overlay `overlay` holds them. The read-only
    /// mounts of the protected entries (`CleanRoom::protected_paths`) should have stopped
    /// every one; this looks again from the protection's patterns themselves, so that no
    /// list of those entries that missed one (a memo kept between runs, a name a walk passed
    /// over) lets a run that rewrote a test stand.
    fn protected_changes(&self, overlay: &Path, tree: git2::Oid) -> Vec<PathBuf> {
        let Ok(tree) = self.source.find_tree(tree) else {
            return Vec::new();
        };
        let upper = overlay.join(crate::sandbox::OVERLAY_UPPER);
        let protection = self.setup.protection;
        let mut changed = Vec::new();
        for item in walkdir::WalkDir::new(&upper)
            .min_depth(1)
            .follow_links(false)
        {
            let (path, unread) = match &item {
                Ok(entry) => (entry.path(), false),
                Err(e) => match e.path() {
                    Some(path) => (path, true),
                    None => continue,
                },
            };
            let Ok(rel) = path.strip_prefix(&upper) else {
                continue;
            };
            let Ok(tracked) = tree.get_path(rel) else {
                continue;
            };
            // A folder the run left unreadable hides what it changed below it: where the tree
            // has a protected entry there, it counts as changed.
            let covered = if unread {
                self.protected_below(&tracked, rel)
            } else {
                protection.is_protected(rel)
            };
            if covered {
                changed.push(rel.to_path_buf());
            }
        }
        changed
    }

    /// Whether the entry `entry` of a tree, at `rel`, is or holds an entry the protection
    /// covers.
    fn protected_below(&self, entry: &git2::TreeEntry, rel: &Path) -> bool {
        let protection = self.setup.protection;
        if protection.is_protected(rel) {
            return true;
        }
        let Ok(sub) = self.source.find_tree(entry.id()) else {
            return false;
        };
        let mut found = false;
        let _ = crate::workspace::entries::each_entry(&self.source, &sub, &mut |dir, inner| {
            found = found
                || protection
                    .is_protected(&rel.join(crate::workspace::entries::entry_path(dir, inner)));
            !found
        });
        found
    }

    /// `test`, with what a setup command made from another tree made again first: a second
    /// run of the base must not stand on what the model's tree produced.
    pub fn test_anew(
        &self,
        tree: git2::Oid,
        commit: Option<git2::Oid>,
    ) -> Result<TestResult, VerifyError> {
        let archived = self.archived(tree, commit, Values::OfCommit)?;
        if self.room.borrow().setup_is_from_another(archived.tree) {
            self.room.borrow_mut().clear_setup()?;
        }
        self.test_as_archived(tree, commit, &|t| self.test_archived(t))
    }

    /// One run of `tree` as anyone would run it (nothing asks for a report file, so there is
    /// no claim to confirm): the verdict is the command's. What a setup command made from
    /// another tree is made again first.
    pub fn test_as_anyone(
        &self,
        tree: git2::Oid,
        commit: Option<git2::Oid>,
    ) -> Result<TestResult, VerifyError> {
        self.test_as_archived(tree, commit, &|t| self.test_archived_as_anyone(t))
    }

    fn test_archived_as_anyone(&self, tree: git2::Oid) -> Result<TestResult, VerifyError> {
        let stale_setup = self.room.borrow().setup_is_from_another(tree);
        if stale_setup {
            self.room.borrow_mut().clear_setup()?;
        }
        self.test_once(tree, Cache::Shared, Report::NotAsked)
    }

    /// Whether nothing but test runs can write into the clean room: the sandbox confines the
    /// model's commands, and no directory the user made writable holds the room (an allowed
    /// /tmp, say) or lies in it.
    fn room_out_of_reach(&self, room: &CleanRoom) -> bool {
        let root = room.root();
        let reaches = |dir: &PathBuf| {
            let dir = dir.canonicalize().unwrap_or_else(|_| dir.clone());
            root.starts_with(&dir) || dir.starts_with(root)
        };
        self.setup.sandbox.confines() && !self.setup.sandbox.allowed_writes().iter().any(reaches)
    }

    /// Why the plain run's output does not back the pass its report claimed: pytest, or the
    /// built-in runner, printed nothing of the tests it ran (a process that wrote the report
    /// itself and ended early passes no test run as anyone runs it). Unless pytest was told to
    /// print nothing at all.
    fn unbacked_by_plain_run(&self, reported: &TestResult, plain: &TestResult) -> Option<String> {
        let claimed = reported.counts.map_or(0, |c| c.passed + c.failed);
        let printed = plain.printed_counts.is_some() || plain.printed_progress;
        let plan = self.setup.plan;
        let silenced = std::iter::once(plan.label.as_str())
            .chain(plan.facts.pytest_addopts.iter().map(String::as_str))
            .any(|words| words.contains("no:terminal"));
        (claimed > 0 && !printed && !silenced && self.prints_what_it_ran())
            .then(|| "the run as anyone runs it printed nothing of the tests it ran".into())
    }

    /// Whether the runner prints something of every test it runs, whatever its verbosity.
    fn prints_what_it_ran(&self) -> bool {
        matches!(
            self.setup.plan.runner,
            Runner::Pytest | Runner::BuiltinPython
        )
    }

    /// Whether the runner is told (through the environment) where to write its results.
    fn reports_through_files(&self) -> bool {
        self.asks_for_junit() || self.asks_for_results_json()
    }

    /// pytest, or a command that may run it, writes JUnit XML where PYTEST_ADDOPTS says.
    fn asks_for_junit(&self) -> bool {
        matches!(self.setup.plan.runner, Runner::Pytest | Runner::Other)
    }

    /// The built-in runner writes its JSON where AGENT_GIT_RESULTS says.
    fn asks_for_results_json(&self) -> bool {
        matches!(self.setup.plan.command, TestCommand::BuiltinPython { .. })
    }

    /// Whether a test run is to write nothing that outlasts it but through an overlay of the
    /// tree: in a sandbox that confines and mounts overlays, with no setup command, build
    /// cache or folder the user made writable, which would be written for real (a run whose
    /// result is thrown away must leave nothing the next one finds). Where the overlay does
    /// not hold after all, what the run wrote in the tree is undone as any run's is.
    fn writes_only_through_overlay(&self) -> bool {
        self.setup.plan.setup.is_none()
            && !self.uses_build_cache()
            && self.setup.sandbox.allowed_writes().is_empty()
            && self.setup.sandbox.mounts_overlays()
    }

    /// Whether the test command may build into `CARGO_TARGET_DIR`.
    fn uses_build_cache(&self) -> bool {
        matches!(self.setup.plan.runner, Runner::Cargo | Runner::Other)
    }

    fn test_once(
        &self,
        tree: git2::Oid,
        cache: Cache,
        report: Report,
    ) -> Result<TestResult, VerifyError> {
        let mut room = self.room.borrow_mut();
        // A run that writes nothing in the tree may go on while the room is checked.
        let beside = match self.writes_only_through_overlay() {
            true => room.reset_beside(tree)?,
            false => {
                room.reset_to(tree)?;
                false
            }
        };
        if let Some(setup) = &self.setup.plan.setup {
            if room.needs_setup(tree)? {
                if let Some(failed) = self.set_up(&mut room, setup, tree)? {
                    return Ok(failed);
                }
            }
        }
        let cache_dir = match cache {
            _ if !self.uses_build_cache() => None,
            Cache::Shared => Some(room.cargo_target()),
            Cache::Fresh => Some(room.fresh_cargo_target()?),
        };
        let mut dirs = room.run_dirs()?;
        let command = self.setup.plan.command_line(&self.runner_script);
        let overlay = room.fresh_overlay(OVERLAYS[0])?;
        let mut raw = self.confined(
            &room,
            &dirs,
            &command,
            cache_dir.as_deref(),
            report,
            Some(&overlay),
        )?;
        let mut on_overlay = overlay.join(crate::sandbox::OVERLAY_HELD).exists();
        self.overlay_held.set(on_overlay);
        let changed = self.protected_changes(&overlay, tree);
        room.remove_overlay(OVERLAYS[0])?;
        if beside && !room.verified()? {
            // The room did not hold what it was taken to: what this run saw does not count.
            // The next reset undoes what changed, and the tree is tested again.
            dirs.remove()?;
            drop(room);
            return self.test_once(tree, cache, report);
        }
        let failed = raw.exit_code != Some(0) && !raw.timed_out && !raw.interrupted;
        if on_overlay && failed && crosses_devices(&raw.output) {
            // An overlay refuses to rename a folder of the tree below it (EXDEV) where a
            // checkout does not: the run on the tree itself, which the overlay left as it was,
            // is the verdict.
            // It starts as the first did: what that one wrote to the build cache (the one place
            // outside the overlay it could write) is not there for it to find.
            dirs.remove()?;
            dirs = room.run_dirs()?;
            let cache = match cache_dir {
                Some(_) => Some(room.fresh_cargo_target()?),
                None => None,
            };
            raw = self.confined(&room, &dirs, &command, cache.as_deref(), report, None)?;
            on_overlay = false;
        }
        if cache == Cache::Shared && cache_dir.is_some() {
            room.note_cache_written();
        }
        let result = self.result_of(raw, room.path(), read_result_files(&dirs.results));
        let result = not_counted_for(result, &changed);
        dirs.remove()?;
        // Where the model's commands could write into the room after such an undo (or into the
        // tree under the overlay), it is undone at the next reset, right before the tests.
        if self.room_out_of_reach(&room) {
            if on_overlay {
                room.left_untouched();
            } else {
                room.undo_in_background();
            }
        }
        Ok(result)
    }

    /// Runs the setup command in the clean room; a failure comes back as a result that says
    /// the tests could not run.
    fn set_up(
        &self,
        room: &mut CleanRoom,
        setup: &str,
        tree: git2::Oid,
    ) -> Result<Option<TestResult>, VerifyError> {
        room.clear_setup()?;
        let dirs = room.run_dirs()?;
        // Not on an overlay: what the setup makes is kept for the test runs.
        let raw = self.confined(room, &dirs, setup, None, Report::NotAsked, None)?;
        dirs.remove()?;
        if raw.exit_code == Some(0) {
            room.record_setup(tree)?;
            return Ok(None);
        }
        let output = self.plain_paths(&raw.output, room.path());
        let status = match raw.exit_code {
            Some(code) => format!("exit {code}"),
            None if raw.timed_out => "timed out".to_string(),
            None => "killed".to_string(),
        };
        let why = format!(
            "the setup command `{setup}` failed ({status}), so the tests did not run:\n{}",
            crate::testrun::tail(&output, 30, 3000)
        );
        Ok(Some(TestResult::not_run(&self.setup.plan.label, &why)))
    }

    /// `command` in the clean room: writes only there, in this run's own HOME, TMPDIR and
    /// results, the build cache if the runner uses one, and what the user allowed. Only the
    /// variables the runner needs are set: code under test should find as little as possible
    /// that tells it apart from a plain checkout.
    /// The test command in `room`'s tree, confined: it hears how long it has been going.
    fn confined(
        &self,
        room: &CleanRoom,
        dirs: &RunDirs,
        command: &str,
        cache: Option<&Path>,
        report: Report,
        overlay: Option<&Path>,
    ) -> Result<crate::sandbox::RawRun, VerifyError> {
        let jail = self.jail(room, dirs, cache, report, overlay)?;
        let label = self.setup.plan.label.as_str();
        let mut waiting = |elapsed: Duration| (self.setup.waiting)(label, elapsed);
        self.run_jail(&jail, command, self.setup.interrupt, &mut waiting)
    }

    fn run_jail(
        &self,
        jail: &Jail,
        command: &str,
        interrupt: &AtomicBool,
        waiting: &mut dyn FnMut(Duration),
    ) -> Result<crate::sandbox::RawRun, VerifyError> {
        let plan = self.setup.plan;
        run_confined(self.setup.sandbox, plan, jail, command, interrupt, waiting)
    }

    /// Where a test run in `room` runs: its tree writable (through `overlay`, if one), with
    /// `dirs` for its HOME, TMPDIR and results, and the environment `report` calls for.
    fn jail(
        &self,
        room: &CleanRoom,
        dirs: &RunDirs,
        cache: Option<&Path>,
        report: Report,
        overlay: Option<&Path>,
    ) -> Result<Jail, VerifyError> {
        let mut extra = vec![("PYTHONNOUSERSITE".to_string(), "1".to_string())];
        if !self.setup.plan.python_path.is_empty() {
            let dirs: Vec<String> = self
                .setup
                .plan
                .python_path
                .iter()
                .map(|dir| room.path().join(dir).display().to_string())
                .collect();
            extra.push(("PYTHONPATH".into(), dirs.join(":")));
        }
        let mut writable = vec![room.path().to_path_buf(), dirs.root.clone()];
        if let Some(cache) = cache {
            extra.push(("CARGO_TARGET_DIR".into(), cache.display().to_string()));
            writable.push(cache.to_path_buf());
        }
        let asked = report == Report::Asked;
        if asked && self.asks_for_junit() {
            let junit = dirs.results.join("junit.xml");
            let options = format!(
                "-p no:cacheprovider --continue-on-collection-errors --junitxml={} \
                 -o junit_family=xunit1",
                junit.display()
            );
            extra.push(("PYTEST_ADDOPTS".into(), options));
        }
        if asked && self.asks_for_results_json() {
            let results = dirs.results.join("results.json");
            extra.push(("AGENT_GIT_RESULTS".into(), results.display().to_string()));
        }
        if matches!(self.setup.plan.runner, Runner::Node | Runner::Other) {
            extra.push(("npm_config_update_notifier".into(), "false".into()));
        }
        let mut path = std::env::var("PATH").unwrap_or_default();
        if let Some(modules) = &self.setup.plan.node_modules {
            extra.push(("NODE_PATH".into(), modules.display().to_string()));
            path = format!("{}:{path}", modules.join(".bin").display());
        }
        if let Some(venv) = &self.setup.plan.venv {
            extra.push(("VIRTUAL_ENV".into(), venv.display().to_string()));
            path = format!("{}:{path}", venv.join("bin").display());
        }
        if self.setup.plan.node_modules.is_some() || self.setup.plan.venv.is_some() {
            extra.push(("PATH".into(), path));
        }
        writable.extend(self.setup.sandbox.allowed_writes().iter().cloned());
        let read_only = match room.current_tree() {
            Some(tree) => room.protected_paths(
                tree,
                self.setup.protection,
                &mut self.protected_memo.borrow_mut(),
            )?,
            None => Vec::new(),
        };
        let jail = Jail {
            cwd: room.path().to_path_buf(),
            writable,
            // The room's own folders (the shared build cache during a run from scratch, its
            // git dir) are not the tests' to read: only the tree, this run's dirs, the cache in
            // use and the runner's script.
            hidden: [self.hidden.as_slice(), &[room.root().to_path_buf()]].concat(),
            shown: [
                self.shown.as_slice(),
                std::slice::from_ref(&self.runner_script),
            ]
            .concat(),
            read_only,
            // The built-in runner lives beside the tree, where the tests get a fresh /tmp.
            keep: vec![self.runner_script.clone()],
            home_overlay: None,
            tree_overlay: overlay.map(|upper| crate::sandbox::helper::TreeOverlay {
                tree: room.path().to_path_buf(),
                upper: upper.to_path_buf(),
            }),
            env: crate::sandbox::sandbox_env(std::env::vars(), &dirs.home, &dirs.tmp, &extra),
        };
        Ok(jail)
    }

    /// Paths in the output made relative to the tree, and the runner's path named plainly:
    /// the clean room's folders mean nothing to the model, and would make every conversation
    /// differ from the last (and every replay diverge).
    fn plain_paths(&self, output: &str, tree: &Path) -> String {
        let script = self.runner_script.display().to_string();
        output
            .replace(&script, "agent-git-runner")
            .replace(&format!("{}/", tree.display()), "")
            .replace(&tree.display().to_string(), ".")
    }
}

/// `command` in `jail`, within the plan's time limit.
fn run_confined(
    sandbox: &Sandbox,
    plan: &TestPlan,
    jail: &Jail,
    command: &str,
    interrupt: &AtomicBool,
    waiting: &mut dyn FnMut(Duration),
) -> Result<crate::sandbox::RawRun, VerifyError> {
    sandbox
        .run(jail, command, plan.timeout, interrupt, waiting)
        .map_err(|source| VerifyError::Start {
            command: plan.label.clone(),
            source,
        })
}

/// Whether a test run's output tells of a rename across file systems (EXDEV): how an overlay
/// refuses to move a folder of the tree below it.
fn crosses_devices(output: &str) -> bool {
    ["Invalid cross-device link", "EXDEV", "os error 18"]
        .iter()
        .any(|sign| output.contains(sign))
}

/// The toolchain directories inside hidden paths that tests still need: the entries of PATH
/// and the VIRTUAL_ENV that lie in the user's checkout (a project's `.venv`, say). A PATH entry
/// a level below the checkout's root is shown alone; deeper ones (`.venv/bin`) with their
/// parent, which holds the rest of the toolchain.
fn toolchain_paths(
    vars: impl IntoIterator<Item = (String, String)>,
    hidden: &[PathBuf],
) -> Vec<PathBuf> {
    let mut shown: Vec<PathBuf> = Vec::new();
    for (name, value) in vars {
        let entries: Vec<&str> = match name.as_str() {
            "PATH" => value.split(':').collect(),
            "VIRTUAL_ENV" => vec![value.as_str()],
            _ => continue,
        };
        for entry in entries.into_iter().filter(|e| e.starts_with('/')) {
            let Ok(path) = Path::new(entry).canonicalize() else {
                continue;
            };
            let Some(inside) = hidden.iter().find(|h| path.starts_with(h) && path != **h) else {
                continue;
            };
            let keep = match path.parent() {
                Some(parent) if name == "PATH" && parent != inside.as_path() => parent,
                _ => path.as_path(),
            };
            if !shown.iter().any(|s| keep.starts_with(s)) {
                shown.push(keep.to_path_buf());
            }
        }
    }
    shown
}

/// The cases a runner wrote to its result files: pytest's JUnit XML or the built-in runner's
/// JSON. None when neither is there or readable: the output is read instead.
fn read_result_files(results: &Path) -> Option<Vec<Case>> {
    // The tests could leave a FIFO or a huge file there: neither may stall the harness.
    // Nor a link to a file the tests could not read themselves.
    let read = |name: &str| {
        let path = results.join(name);
        if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            return None;
        }
        let bytes = crate::files::read_regular(&path, 256 << 20).ok()?;
        String::from_utf8(bytes).ok()
    };
    if let Some(xml) = read("junit.xml") {
        if let Ok(cases) = cases_from_junit(&xml) {
            return Some(cases);
        }
    }
    read("results.json").and_then(|json| cases_from_results_json(&json).ok())
}

/// A test result as the model reads it: the summary, the failing tests, what vanished, the
/// output's tail.
pub fn describe_for_model(result: &TestResult) -> String {
    let mut text = format!("Tests ({}): {}", result.command, result.summary());
    if result.cached {
        text.push_str(
            "\n[nothing changed since these files were last tested: this is that result]",
        );
    }
    if !result.failing.is_empty() {
        text.push_str("\nFailing tests:");
        for failure in &result.failing {
            match &failure.detail {
                Some(detail) => text.push_str(&format!("\n- {}: {detail}", failure.name)),
                None => text.push_str(&format!("\n- {}", failure.name)),
            }
        }
    }
    if !result.vanished.is_empty() {
        text.push_str(
            "\nTests that ran before any change but did not run and pass now (every one must):",
        );
        for name in &result.vanished {
            text.push_str(&format!("\n- vanished: {name}"));
        }
    }
    if result.vanished_uncounted > 0 {
        text.push_str(&format!(
            "\n{} fewer tests ran (or more were skipped) than before any change; every test \
             must run and pass",
            result.vanished_uncounted
        ));
    }
    if !result.passed && !result.tail.is_empty() {
        text.push_str(&format!("\nOutput (last lines):\n{}", result.tail));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_venv_in_the_checkout_stays_visible_to_the_tests() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().canonicalize().unwrap().join("repo");
        for sub in [".venv/bin", "bin", "node_modules/.bin"] {
            std::fs::create_dir_all(repo.join(sub)).unwrap();
        }
        let at = |sub: &str| repo.join(sub).display().to_string();
        let vars = [
            (
                "PATH".to_string(),
                format!(
                    "{}:{}:/usr/bin:{}",
                    at(".venv/bin"),
                    at("bin"),
                    at("node_modules/.bin")
                ),
            ),
            ("VIRTUAL_ENV".to_string(), at(".venv")),
            ("HOME".to_string(), at("")),
        ];
        assert_eq!(
            toolchain_paths(vars, std::slice::from_ref(&repo)),
            vec![
                repo.join(".venv"),
                repo.join("bin"),
                repo.join("node_modules")
            ]
        );
    }
}
