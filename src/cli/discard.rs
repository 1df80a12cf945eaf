//! `agent-git discard RUN`: deletes a run's branch, kept work tree and transcript.

use super::CliError;
use clap::Args;

/// What `agent-git discard` takes: the run or set to delete.
#[derive(Debug, Clone, Args)]
pub struct DiscardArgs {
    /// The run: its branch or run id, or an unambiguous prefix of either; or a set of
    /// attempts (`fix --attempts`) by its id, which deletes only its summary.
    pub run: String,
    /// Which repository (`--repo`); by default the one containing the current directory.
    #[command(flatten)]
    pub repo: super::RepoArg,
}

/// Deletes the run's branch, kept work tree and transcript, or only a set's summary (its runs
/// stay). Exit code 0.
pub fn run(args: DiscardArgs) -> Result<u8, CliError> {
    let repo = args.repo.open()?;
    let runs = crate::runs::list(&repo)?;
    let sets = crate::runs::sets(&repo)?;
    let run = match crate::runs::resolve_named(&runs, &sets, &args.run)? {
        crate::runs::Named::Run(run) => run,
        crate::runs::Named::Set(set) => {
            crate::workspace::sets::remove_set(&repo, &set.id)
                .map_err(crate::runs::RunsError::from)?;
            println!(
                "deleted the summary of set {}; its runs stay (`agent-git discard RUN` deletes \
                 each)",
                set.id
            );
            return Ok(0);
        }
    };
    crate::runs::discard(&repo, run)?;
    println!(
        "deleted branch {} (was {}) and the transcript of run {}",
        run.branch,
        &run.tip.to_string()[..7],
        run.run_id
    );
    Ok(0)
}
