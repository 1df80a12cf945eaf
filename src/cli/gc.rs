//! `agent-git gc`: removes what runs that did not finish left behind.

use super::CliError;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
pub struct GcArgs {
    /// The repository whose leftover work trees to remove [default: the one containing the
    /// current directory, if any]. Temp dirs and cgroups are removed either way.
    #[arg(long)]
    pub repo: Option<PathBuf>,
}

/// Removes the work trees, temp dirs and cgroups of runs that are gone (killed, or the machine
/// went down); a run still going keeps everything. Branches always stay.
pub fn run(args: GcArgs) -> Result<u8, CliError> {
    let repo = match &args.repo {
        Some(path) => Some(crate::workspace::open_user_repo(path)?),
        None => std::env::current_dir()
            .ok()
            .and_then(|dir| crate::workspace::open_user_repo(&dir).ok()),
    };
    let swept = crate::run::sweep_leftovers(repo.as_ref());
    println!("agent-git gc: {}", swept.describe());
    Ok(0)
}
