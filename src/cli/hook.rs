//! `agent-git hook install` / `uninstall`: agent-git's pre-push hook in the repository.

use super::CliError;
use crate::check::install::{hooks_dir, install, uninstall, Installed, Uninstalled, CHAINED};
use clap::{Args, Subcommand};

/// What `agent-git hook` takes: install or uninstall.
#[derive(Debug, Args)]
pub struct HookArgs {
    /// Whether to install or uninstall, and in which repository.
    #[command(subcommand)]
    pub action: HookAction,
}

/// `agent-git hook`'s subcommands.
#[derive(Debug, Subcommand)]
pub enum HookAction {
    /// Install the pre-push hook in the repository's hooks directory (core.hooksPath, else
    /// the git dir's hooks/). A pre-push hook that is there is kept beside it and runs first.
    Install(super::RepoArg),
    /// Remove agent-git's pre-push hook and put back the one that was there before.
    Uninstall(super::RepoArg),
}

/// Installs or removes the pre-push hook and says what it did. Exit code 0.
pub fn run(args: HookArgs) -> Result<u8, CliError> {
    let (HookAction::Install(place) | HookAction::Uninstall(place)) = &args.action;
    let repo = place.open()?;
    let dir = hooks_dir(&repo).map_err(CliError::Usage)?;
    let hook = dir.join("pre-push");
    let hook = hook.display();
    let said = match args.action {
        HookAction::Install(_) => match install(&dir).map_err(CliError::Usage)? {
            Installed::Fresh => format!("installed the pre-push hook: {hook}"),
            Installed::Chained => format!(
                "installed the pre-push hook: {hook}; the one that was there is now {} and \
                 runs first",
                dir.join(CHAINED).display()
            ),
            Installed::Updated => format!("updated agent-git's pre-push hook: {hook}"),
            Installed::AlreadyInstalled => format!("the pre-push hook is installed: {hook}"),
        },
        HookAction::Uninstall(_) => match uninstall(&dir).map_err(CliError::Usage)? {
            Uninstalled::Removed => format!("removed the pre-push hook: {hook}"),
            Uninstalled::Restored => format!("put back the pre-push hook that was there: {hook}"),
            Uninstalled::NotInstalled => {
                format!("agent-git's pre-push hook is not installed ({hook}); nothing to do")
            }
        },
    };
    println!("agent-git: {said}");
    Ok(0)
}
