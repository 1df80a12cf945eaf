//! `agent-git tests [REV]`: a dry run before spending on a model. What a fix run would find:
//! the test command and why, the environment, how the inventory is checked, and whether the
//! tests fail (a fix would start), pass, or cannot run.

use super::CliError;
use crate::check::{describe_dry_run, Checker};
use crate::settings::Layer;
use crate::workspace::{resolve_base, SetupError};
use clap::Args;
use std::path::PathBuf;

pub const TESTS_HELP: &str = "\
The commit's tests run once in a clean room, as a fix run's first test run would: the same
command, environment and sandbox. What they found is kept for the tree and set-up, so asking
again is instant (--fresh tests again); a stop for the environment is never kept.

Exit codes:
  0    the tests run and some fail: a fix run would start
  1    the tests already pass: a fix run has nothing to do
  2    usage or setup error (not a repository, unknown revision, no test command)
  4    the tests cannot run as they are (the reason says why, and the fix)";

#[derive(Debug, Args)]
#[command(after_help = TESTS_HELP)]
pub struct TestsArgs {
    /// The commit whose tests run [default: HEAD].
    #[arg(value_name = "REV")]
    pub rev: Option<String>,
    /// The repository [default: the one containing the current directory].
    #[arg(long, value_name = "PATH")]
    pub repo: Option<PathBuf>,
    /// Shell command that runs the tests [default: git config agent-git.testCmd, else
    /// detected from the commit's files].
    #[arg(long, value_name = "CMD")]
    pub test_cmd: Option<String>,
    /// Shell command run in the clean room before the tests (an install step).
    #[arg(long, value_name = "CMD")]
    pub setup_cmd: Option<String>,
    /// Seconds the test run may take [default: 300].
    #[arg(long, value_name = "SECS")]
    pub test_timeout: Option<u64>,
    /// Test again even if this tree was tested before with the same set-up.
    #[arg(long)]
    pub fresh: bool,
    /// Print one JSON object on stdout instead of the text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: TestsArgs) -> Result<u8, CliError> {
    let repo = super::open_repo(args.repo.as_deref())?;
    let rev = args.rev.unwrap_or_else(|| "HEAD".into());
    let base = resolve_base(&repo, &rev).map_err(|e| match e {
        SetupError::UnknownBase(rev) => CliError::Usage(format!(
            "unknown revision `{rev}`; name a branch, tag or commit that exists"
        )),
        other => other.into(),
    })?;
    let flags = Layer {
        test_cmd: args.test_cmd,
        setup_cmd: args.setup_cmd,
        test_timeout: args.test_timeout,
        ..Layer::default()
    };
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
