//! `agent-git apply RUN [--merge]`: lands a run's work on the current branch.

use super::CliError;
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct ApplyArgs {
    /// The run: its branch or run id, or an unambiguous prefix of either.
    pub run: String,
    /// Keep the run's commits: a merge commit of its last edit (the empty report commit is
    /// left out) instead of one squashed commit.
    #[arg(long)]
    pub merge: bool,
    #[command(flatten)]
    pub repo: super::RepoArg,
}

pub fn run(args: ApplyArgs) -> Result<u8, CliError> {
    let repo = args.repo.open()?;
    let runs = crate::runs::list(&repo)?;
    let run = crate::runs::resolve(&runs, &args.run)?;
    let landed = crate::runs::apply(&repo, run, args.merge)?;
    let how = if args.merge { "merged" } else { "applied" };
    println!(
        "{how} run {} ({}) as {}",
        run.run_id,
        run.branch,
        &landed.to_string()[..7]
    );
    println!(
        "its branch stays; `agent-git discard {}` deletes it",
        run.run_id
    );
    Ok(0)
}
