//! `agent-git show RUN`: a run's report, commits and diffstat.

use super::CliError;
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct ShowArgs {
    /// The run: its branch or run id, or an unambiguous prefix of either; or a set of
    /// attempts (`fix --attempts`) by its id, for its summary.
    pub run: String,
    #[command(flatten)]
    pub repo: super::RepoArg,
}

pub fn run(args: ShowArgs) -> Result<u8, CliError> {
    let repo = args.repo.open()?;
    let runs = crate::runs::list(&repo)?;
    let sets = crate::runs::sets(&repo)?;
    let run = match crate::runs::resolve_named(&runs, &sets, &args.run)? {
        crate::runs::Named::Run(run) => run,
        crate::runs::Named::Set(set) => {
            let shown = crate::runs::show_set(set, &runs);
            print!("{}", crate::text::for_terminal(&shown));
            return Ok(0);
        }
    };
    print!(
        "{}",
        crate::text::for_terminal(&crate::runs::show(&repo, run)?)
    );
    Ok(0)
}
