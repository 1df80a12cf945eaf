//! The command line: one file per subcommand, each only glue between clap and the library.

pub mod apply;
pub mod check;
pub mod completions;
pub mod demo;
pub mod discard;
pub mod eval;
pub mod fix;
pub mod gc;
pub mod hook;
pub mod man;
pub mod runs;
pub mod sandbox_exec;
pub mod show;
pub mod tests;
pub mod transcript;

use clap::{Parser, Subcommand};

const EXIT_CODES: &str = "\
Exit codes:
  0    passed: the final clean-room test run passes with every test of the inventory (also
       after a budget stop), or the tests already passed (--if-failing)
  1    tests still fail or vanished when a budget (turns, cost, time) or being stuck ends
       the run
  2    usage or setup error, before any branch exists
  3    the model failed or refused, and the tests still fail (report written)
  4    the harness failed after the branch was created, or the test command cannot run at
       all (the model is not called, no branch is kept)
  130  interrupted (Ctrl-C; report written)

runs, show, apply, discard, transcript, gc:
  0    done
  2    usage error or refusal: nothing was changed (unknown or ambiguous run, a dirty
       checkout, a conflict, a branch checked out)
  4    git failed under agent-git";

/// The whole command line: one subcommand and its arguments.
#[derive(Debug, Parser)]
#[command(
    name = "agent-git",
    version,
    about = "A git-native coding agent: it works on its own branch, commits every accepted edit, \
             cannot touch the tests and believes only the test results.",
    after_help = EXIT_CODES
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// agent-git's subcommands; each one's doc is its line in `--help`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the fix loop on a repository whose tests fail, on a new branch.
    #[command(after_help = EXIT_CODES)]
    Fix(Box<fix::FixArgs>),
    /// Run the fix loop on a built-in example with a scripted model (no API key, no network).
    Demo(demo::DemoArgs),
    /// List the repository's agent runs, newest first.
    Runs(runs::RunsArgs),
    /// Show a run: its report, its commits and the files it changed.
    Show(show::ShowArgs),
    /// Bring a run's work onto the current branch: one commit, or a merge (--merge).
    Apply(apply::ApplyArgs),
    /// Delete a run's branch, its kept work tree and its stored transcript.
    Discard(discard::DiscardArgs),
    /// Print the conversation of a run, stored in git (refs/notes/agent-git), as JSON.
    Transcript(transcript::TranscriptArgs),
    /// Remove what runs that did not finish left behind (work trees, temp dirs, cgroups) and
    /// what runs keep for the next ones (pooled work trees, clean rooms); with --failed or
    /// --older-than, also the branches of such runs. Every run does the first for its
    /// repository as it starts.
    Gc(gc::GcArgs),
    /// Test a commit in a clean room; with --pre-push, what a push brings (the pre-push hook).
    Check(check::CheckArgs),
    /// A dry run before spending on a model: the test command and why, the environment, the
    /// inventory, and whether the tests fail, pass or cannot run.
    Tests(Box<tests::TestsArgs>),
    /// Run an eval suite (each task N times, as ordinary runs), report results, import tasks.
    Eval(Box<eval::EvalArgs>),
    /// Install or remove agent-git's pre-push hook.
    Hook(hook::HookArgs),
    /// Print the completion script for a shell (bash, zsh, fish); the README says where it goes.
    Completions(completions::CompletionsArgs),
    /// Print the manual page (roff); with --dir, write it and one page per subcommand there.
    Man(man::ManArgs),
    /// The sandbox helper that agent-git runs commands through.
    #[command(hide = true, name = "sandbox-exec")]
    SandboxExec(Box<sandbox_exec::SandboxExecArgs>),
    /// Checks a whole tree out into a clean room, in a process of its own: agent-git runs it.
    #[command(hide = true, name = crate::workspace::CHECK_OUT_ROOM)]
    CheckOutRoom(CheckOutRoomArgs),
    /// Adds a run's work tree, in a process of its own: agent-git runs it.
    #[command(hide = true, name = crate::workspace::ADD_WORK_TREE)]
    AddWorkTree(AddWorkTreeArgs),
}

/// What the hidden `add-work-tree` command takes: the repository, and the work tree to add for a
/// run's branch.
#[derive(Debug, clap::Args)]
pub struct AddWorkTreeArgs {
    /// The repository's git dir.
    git: std::path::PathBuf,
    /// The work tree's name in git.
    name: String,
    /// Where it goes.
    path: std::path::PathBuf,
    /// The branch it holds.
    branch: String,
}

fn add_work_tree(args: &AddWorkTreeArgs) -> Result<u8, CliError> {
    let repo = git2::Repository::open(&args.git)
        .map_err(|e| CliError::Usage(format!("{}: {e}", args.git.display())))?;
    crate::workspace::add_work_tree_here(&repo, &args.name, &args.path, &args.branch)
        .map_err(|e| CliError::Harness(e.to_string()))?;
    Ok(0)
}

/// What the hidden `check-out-room` command takes: the clean room, and the tree to check out into
/// it.
#[derive(Debug, clap::Args)]
pub struct CheckOutRoomArgs {
    /// The clean room's git dir.
    git: std::path::PathBuf,
    /// Its tree, where the files go.
    work: std::path::PathBuf,
    /// The id of the tree to check out.
    tree: String,
}

fn check_out_room(args: &CheckOutRoomArgs) -> Result<u8, CliError> {
    let tree = git2::Oid::from_str(&args.tree)
        .map_err(|e| CliError::Usage(format!("not a tree id: {}: {e}", args.tree)))?;
    crate::workspace::check_out_room(&args.git, &args.work, tree)
        .map_err(|e| CliError::Harness(e.to_string()))?;
    Ok(0)
}

/// Why a command failed; its variant decides the exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad input or setup; nothing was created.
    #[error("{0}")]
    Usage(String),
    /// The harness failed after the branch was created.
    #[error("{0}")]
    Harness(String),
}

impl CliError {
    /// 2 for a usage error, 4 for a harness failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Harness(_) => 4,
        }
    }
}

/// Ctrl-C or SIGTERM sets `flag` (and `first` is said): no new child run starts, running
/// ones are told to stop and write their reports. A second one exits at once. The runtime
/// lives as long as the returned value.
fn watch_interrupt(
    flag: std::sync::Arc<std::sync::atomic::AtomicBool>,
    first: &'static str,
) -> Result<tokio::runtime::Runtime, CliError> {
    let harness = |e: std::io::Error| CliError::Harness(format!("cannot watch for Ctrl-C: {e}"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(harness)?;
    crate::run::watch_signals(&runtime, flag, Some(first)).map_err(harness)?;
    Ok(runtime)
}

impl From<crate::run::RunError> for CliError {
    fn from(e: crate::run::RunError) -> Self {
        match e {
            crate::run::RunError::Setup(e) => CliError::Usage(e.to_string()),
            crate::run::RunError::Plan(e) => CliError::Usage(e.to_string()),
            crate::run::RunError::Harness(e) => CliError::Harness(e),
        }
    }
}

impl From<crate::prepare::PrepareError> for CliError {
    fn from(e: crate::prepare::PrepareError) -> Self {
        CliError::Usage(e.to_string())
    }
}

impl From<crate::workspace::SetupError> for CliError {
    fn from(e: crate::workspace::SetupError) -> Self {
        CliError::Usage(e.to_string())
    }
}

impl From<crate::runs::RunsError> for CliError {
    fn from(e: crate::runs::RunsError) -> Self {
        if e.is_refusal() {
            CliError::Usage(e.to_string())
        } else {
            CliError::Harness(e.to_string())
        }
    }
}

/// The repository a command works on: `--repo`, defined once for every command.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RepoArg {
    /// The repository [default: the one containing the current directory].
    #[arg(long = "repo", value_name = "PATH")]
    pub path: Option<std::path::PathBuf>,
}

impl RepoArg {
    /// The repository named, or the one containing the current directory.
    pub fn open(&self) -> Result<git2::Repository, CliError> {
        let dir = match &self.path {
            Some(path) => path.clone(),
            None => std::env::current_dir()
                .map_err(|e| CliError::Usage(format!("cannot read the current directory: {e}")))?,
        };
        Ok(crate::workspace::open_user_repo(&dir)?)
    }

    /// The repository named (an error if it is none), else the one containing the current
    /// directory if there is one.
    pub fn open_if_any(&self) -> Result<Option<git2::Repository>, CliError> {
        match &self.path {
            Some(_) => self.open().map(Some),
            None => Ok(self.open().ok()),
        }
    }
}

/// Runs a parsed command line; the result is the process exit code.
pub fn run(cli: Cli) -> Result<u8, CliError> {
    // Before anything else starts a thread. Not in the sandbox helper: its environment is
    // already clean, and a process that is not dumpable cannot map its user namespace.
    if !matches!(cli.command, Command::SandboxExec(_)) {
        crate::secrets::take_from_environment();
    }
    crate::memory::tune();
    // libgit2 hashes every object it reads again (SHA-1 with collision detection), which git
    // does not do on a read: each walk of a large tree paid for it in full. The objects are
    // the repository's own, which every export of the branch reads as they are.
    git2::opts::strict_hash_verification(false);
    // This very binary, even if a newer one has replaced its file since it started.
    let own = std::path::PathBuf::from("/proc/self/exe");
    if let Some(agent_git) = own
        .exists()
        .then_some(own)
        .or_else(|| std::env::current_exe().ok())
    {
        crate::workspace::check_out_apart(agent_git);
    }
    match cli.command {
        Command::Fix(args) => fix::run(*args),
        Command::Demo(args) => demo::run(args),
        Command::Runs(args) => runs::run(args),
        Command::Show(args) => show::run(args),
        Command::Tests(args) => tests::run(*args),
        Command::Apply(args) => apply::run(args),
        Command::Discard(args) => discard::run(args),
        Command::Transcript(args) => transcript::run(args),
        Command::Gc(args) => gc::run(args),
        Command::Check(args) => check::run(args),
        Command::Hook(args) => hook::run(args),
        Command::Eval(args) => eval::run(*args),
        Command::Completions(args) => completions::run(args),
        Command::Man(args) => man::run(args),
        Command::SandboxExec(args) => Ok(sandbox_exec::run(*args)),
        Command::CheckOutRoom(args) => check_out_room(&args),
        Command::AddWorkTree(args) => add_work_tree(&args),
    }
}

#[cfg(test)]
mod definition {
    /// clap's own checks of every command's definition (unique names and groups, ...),
    /// which it otherwise makes only when that command is first parsed.
    #[test]
    fn every_command_is_well_defined() {
        <super::Cli as clap::CommandFactory>::command().debug_assert();
    }
}
