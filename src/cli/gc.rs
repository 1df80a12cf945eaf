//! `agent-git gc`: removes what runs that did not finish left behind and, when asked, the
//! branches of finished runs.

use super::CliError;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
pub struct GcArgs {
    /// The repository [default: the one containing the current directory, if any]. Temp dirs
    /// and cgroups are removed either way.
    #[arg(long)]
    pub repo: Option<PathBuf>,
    /// Also delete the branches (with their kept work trees and transcripts) of runs finished
    /// longer ago than this: `14d`, `2w`, `12h`.
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub older_than: Option<i64>,
    /// Also delete the branches of runs that did not pass (with --older-than: only those).
    #[arg(long)]
    pub failed: bool,
}

fn parse_age(text: &str) -> Result<i64, String> {
    crate::runs::age::parse_duration(text)
        .ok_or_else(|| format!("`{text}` is not an age; write it like 14d, 2w, 12h or 30m"))
}

/// Removes the work trees, temp dirs and cgroups of runs that are gone (killed, or the machine
/// went down), and the work trees and clean rooms kept for the next runs; a run still going
/// keeps everything. Branches stay unless --older-than or --failed asks for them.
pub fn run(args: GcArgs) -> Result<u8, CliError> {
    let repo = match &args.repo {
        Some(path) => Some(crate::workspace::open_user_repo(path)?),
        None => std::env::current_dir()
            .ok()
            .and_then(|dir| crate::workspace::open_user_repo(&dir).ok()),
    };
    let swept = crate::run::sweep_leftovers(repo.as_ref());
    println!("agent-git gc: {}", swept.describe());
    // Runs are judged as they are when gc starts: a run still going now is never deleted,
    // however long the removals below take.
    let deletes_runs = args.failed || args.older_than.is_some();
    let code = match &repo {
        Some(repo) if deletes_runs => delete_runs(repo, &args)?,
        None if deletes_runs => {
            return Err(CliError::Usage(
                "--failed and --older-than need a repository; run in one or pass --repo PATH"
                    .into(),
            ))
        }
        _ => 0,
    };
    if let Some(repo) = &repo {
        let emptied = crate::workspace::pool::empty(repo);
        if !emptied.is_empty() {
            let paths: Vec<String> = emptied.iter().map(|p| p.display().to_string()).collect();
            println!(
                "agent-git gc: removed the work trees kept for the next runs: {}",
                paths.join(", ")
            );
        }
        let rooms = std::env::temp_dir()
            .canonicalize()
            .ok()
            .zip(repo.commondir().join("objects").canonicalize().ok())
            .map(|(temp, objects)| crate::workspace::rooms::empty(&temp, &objects))
            .unwrap_or_default();
        if !rooms.is_empty() {
            let paths: Vec<String> = rooms.iter().map(|p| p.display().to_string()).collect();
            println!(
                "agent-git gc: removed the clean rooms kept for the next runs: {}",
                paths.join(", ")
            );
        }
    }
    let orphans = crate::workspace::rooms::sweep_orphans(&std::env::temp_dir());
    if !orphans.is_empty() {
        let paths: Vec<String> = orphans.iter().map(|p| p.display().to_string()).collect();
        println!(
            "agent-git gc: removed the clean rooms of repositories that are gone: {}",
            paths.join(", ")
        );
    }
    Ok(code)
}

/// Deletes the runs asked for, skipping (and naming) the ones that may not go.
fn delete_runs(repo: &git2::Repository, args: &GcArgs) -> Result<u8, CliError> {
    let runs = crate::runs::list(repo)?;
    let now = crate::runs::now();
    for run in crate::runs::doomed(&runs, args.failed, args.older_than, now) {
        match crate::runs::discard(repo, run) {
            Ok(()) => println!(
                "deleted branch {} (run {}, {})",
                run.branch, run.run_id, run.outcome
            ),
            Err(e) if e.is_refusal() => println!("kept branch {}: {e}", run.branch),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(0)
}
