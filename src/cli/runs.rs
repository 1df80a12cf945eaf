//! `agent-git runs`: the repository's agent runs, newest first.

use super::CliError;
use clap::Args;

/// What `agent-git runs` takes: which runs to list, and how.
#[derive(Debug, Clone, Args)]
pub struct RunsArgs {
    /// List applied runs too (by default only runs not yet applied, and runs still going).
    #[arg(long)]
    pub all: bool,
    /// Print one JSON array instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Which repository (`--repo`); by default the one containing the current directory.
    #[command(flatten)]
    pub repo: super::RepoArg,
}

/// Prints the runs, newest first, as a table (then the sets of attempts) or as JSON. Exit code 0.
pub fn run(args: RunsArgs) -> Result<u8, CliError> {
    let repo = args.repo.open()?;
    let all = crate::runs::list(&repo)?;
    let now = crate::runs::now();
    let (shown, hidden): (Vec<_>, Vec<_>) = all
        .into_iter()
        .partition(|r| args.all || r.applied.is_none());
    if args.json {
        let list: Vec<_> = shown.iter().map(|r| r.json(now)).collect();
        println!("{}", serde_json::Value::Array(list));
        return Ok(0);
    }
    if shown.is_empty() {
        println!("no agent runs to show");
    } else {
        print!(
            "{}",
            crate::text::for_terminal(&crate::runs::table(&shown, now))
        );
    }
    let sets = crate::runs::sets(&repo)?;
    if !sets.is_empty() {
        let every: Vec<_> = shown.iter().chain(&hidden).cloned().collect();
        print!(
            "{}",
            crate::text::for_terminal(&crate::runs::sets_table(&sets, &every, now))
        );
    }
    if !hidden.is_empty() {
        eprintln!(
            "{} applied run(s) not shown; `agent-git runs --all` lists every run",
            hidden.len()
        );
    }
    Ok(0)
}
