//! `agent-git apply RUN [--merge]`: lands a run's work on the current branch.

use super::CliError;
use clap::Args;

/// What `agent-git apply` takes: the run (or set), and how to land it.
#[derive(Debug, Clone, Args)]
pub struct ApplyArgs {
    /// The run: its branch or run id, or an unambiguous prefix of either; or a set of
    /// attempts (`fix --attempts`) by its id, which applies the run the set chose.
    pub run: String,
    /// Keep the run's commits: a merge commit of its last edit (the empty report commit is
    /// left out) instead of one squashed commit.
    #[arg(long)]
    pub merge: bool,
    /// Only the changes the run's tests require, as its proof found them: the others (a
    /// hunk, or a file change whole, the tests pass without) are left out. The result is
    /// tested in a clean room before it is committed.
    #[arg(long, conflicts_with = "merge")]
    pub required_only: bool,
    /// Which repository (`--repo`); by default the one containing the current directory.
    #[command(flatten)]
    pub repo: super::RepoArg,
}

/// Lands the run (for a set, the run it chose) on the current branch as one commit, a merge or its
/// required changes only, and says how; the run's branch stays. Exit code 0.
pub fn run(args: ApplyArgs) -> Result<u8, CliError> {
    let repo = args.repo.open()?;
    let runs = crate::runs::list(&repo)?;
    let sets = crate::runs::sets(&repo)?;
    let run = match crate::runs::resolve_named(&runs, &sets, &args.run)? {
        crate::runs::Named::Run(run) => run,
        crate::runs::Named::Set(set) => crate::runs::chosen_run(set, &runs)?,
    };
    let (landed, how) = if args.required_only {
        let mut progress = |line: &str| eprintln!("agent-git: {}", crate::text::for_terminal(line));
        let (landed, left_out) = crate::runs::apply_required(&repo, run, &mut progress)?;
        let how = match left_out {
            0 => "applied".to_string(),
            n => format!("applied the required changes ({n} left out) of"),
        };
        (landed, how)
    } else {
        let landed = crate::runs::apply(&repo, run, args.merge)?;
        let how = if args.merge { "merged" } else { "applied" };
        (landed, how.to_string())
    };
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
