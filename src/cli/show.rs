//! `agent-git show RUN`: a run's report, commits and diffstat.

use super::CliError;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
pub struct ShowArgs {
    /// The run: its branch or run id, or an unambiguous prefix of either.
    pub run: String,
    /// The repository [default: the one containing the current directory].
    #[arg(long)]
    pub repo: Option<PathBuf>,
}

pub fn run(args: ShowArgs) -> Result<u8, CliError> {
    let repo = super::open_repo(args.repo.as_deref())?;
    let runs = crate::runs::list(&repo)?;
    let run = crate::runs::resolve(&runs, &args.run)?;
    print!(
        "{}",
        crate::text::for_terminal(&crate::runs::show(&repo, run)?)
    );
    Ok(0)
}
