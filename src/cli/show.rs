//! `agent-git show RUN`: a run's report, commits and diffstat.

use super::CliError;
use clap::Args;

/// What `agent-git show` takes: the run (or set), and how much of it to print.
#[derive(Debug, Clone, Args)]
pub struct ShowArgs {
    /// The run: its branch or run id, or an unambiguous prefix of either; or a set of
    /// attempts (`fix --attempts`) by its id, for its summary.
    pub run: String,
    /// Also print the patch: the change from the run's base to its last edit, as `git diff`
    /// prints it.
    #[arg(short = 'p', long = "patch", conflicts_with = "stat")]
    pub patch: bool,
    /// Print only the files the run changed, with lines added and removed.
    #[arg(long)]
    pub stat: bool,
    /// Which repository (`--repo`); by default the one containing the current directory.
    #[command(flatten)]
    pub repo: super::RepoArg,
}

/// Prints the run's report, commits and diffstat (with `--patch` its diff too, with `--stat` only
/// its files), or a set's summary. Exit code 0.
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
    let shown = if args.stat {
        crate::runs::show_stat(&repo, run)?
    } else if args.patch {
        crate::runs::show(&repo, run)? + "\n" + &crate::runs::patch(&repo, run)?
    } else {
        crate::runs::show(&repo, run)?
    };
    print!("{}", crate::text::for_terminal(&shown));
    Ok(0)
}
