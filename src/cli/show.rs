//! `agent-git show RUN`: a run's report, commits and diffstat.

use super::CliError;
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct ShowArgs {
    /// The run: its branch or run id, or an unambiguous prefix of either.
    pub run: String,
    #[command(flatten)]
    pub repo: super::RepoArg,
}

pub fn run(args: ShowArgs) -> Result<u8, CliError> {
    let repo = args.repo.open()?;
    let runs = crate::runs::list(&repo)?;
    let run = crate::runs::resolve(&runs, &args.run)?;
    print!(
        "{}",
        crate::text::for_terminal(&crate::runs::show(&repo, run)?)
    );
    Ok(0)
}
