//! `agent-git discard RUN`: deletes a run's branch, kept work tree and transcript.

use super::CliError;
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct DiscardArgs {
    /// The run: its branch or run id, or an unambiguous prefix of either.
    pub run: String,
    #[command(flatten)]
    pub repo: super::RepoArg,
}

pub fn run(args: DiscardArgs) -> Result<u8, CliError> {
    let repo = args.repo.open()?;
    let runs = crate::runs::list(&repo)?;
    let run = crate::runs::resolve(&runs, &args.run)?;
    crate::runs::discard(&repo, run)?;
    println!(
        "deleted branch {} (was {}) and the transcript of run {}",
        run.branch,
        &run.tip.to_string()[..7],
        run.run_id
    );
    Ok(0)
}
