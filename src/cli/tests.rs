//! `agent-git tests [REV]`: a dry run before spending on a model. What a fix run would find:
//! the test command and why, the environment, how the inventory is checked, and whether the
//! tests fail (a fix would start), pass, or cannot run.

use super::CliError;
use crate::check::{describe_dry_run, Checker};
use crate::settings::TestFlags;
use crate::workspace::{resolve_base, SetupError};
use clap::Args;

/// What `agent-git tests --help` prints after the flags: what the dry run does, and the exit codes.
pub const TESTS_HELP: &str = "\
The commit's tests run once in a clean room, as a fix run's first test run would: the same
command, environment and sandbox. What they found is kept for the tree and set-up, so asking
again is instant (--fresh tests again); a stop for the environment is never kept.

Exit codes:
  0    the tests run and some fail: a fix run would start
  1    the tests already pass: a fix run has nothing to do
  2    usage or setup error (not a repository, unknown revision, no test command)
  4    the tests cannot run as they are (the reason says why, and the fix)";

/// What `agent-git tests` takes: the commit, the test run's settings, and how to print what it
/// found.
#[derive(Debug, Args)]
#[command(after_help = TESTS_HELP)]
pub struct TestsArgs {
    /// The commit whose tests run [default: HEAD].
    #[arg(value_name = "REV")]
    pub rev: Option<String>,
    /// Which repository (`--repo`); by default the one containing the current directory.
    #[command(flatten)]
    pub repo: super::RepoArg,
    /// The test run's settings, as `fix` takes them.
    #[command(flatten)]
    pub settings: TestFlags,
    /// Test again even if this tree was tested before with the same set-up.
    #[arg(long)]
    pub fresh: bool,
    /// Print one JSON object on stdout instead of the text.
    #[arg(long)]
    pub json: bool,
}

/// Runs the commit's tests once in a clean room (or reuses what an earlier run found) and prints
/// what a fix run would find; the exit code is one `TESTS_HELP` lists.
pub fn run(args: TestsArgs) -> Result<u8, CliError> {
    let repo = args.repo.open()?;
    let rev = args.rev.unwrap_or_else(|| "HEAD".into());
    let base = resolve_base(&repo, &rev).map_err(|e| match e {
        SetupError::UnknownBase(rev) => CliError::Usage(format!(
            "unknown revision `{rev}`; name a branch, tag or commit that exists"
        )),
        other => other.into(),
    })?;
    let flags = args.settings.0;
    let mut checker = Checker::new(&repo);
    let found = checker
        .dry_run(base.id, flags, args.fresh, &mut |line| {
            eprintln!("agent-git: {}", crate::text::for_terminal(line))
        })
        .map_err(CliError::Usage)?;
    if args.json {
        println!("{}", found.json);
    } else {
        print!(
            "{}",
            crate::text::for_terminal(&describe_dry_run(&found.json))
        );
    }
    Ok(found.verdict.exit_code())
}
