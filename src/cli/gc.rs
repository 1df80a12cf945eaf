//! `agent-git gc`: removes what runs that did not finish left behind and, when asked, the
//! branches of finished runs.

use super::CliError;
use clap::Args;

/// What `agent-git gc` takes: which finished runs' branches go too, and whether only to say so.
#[derive(Debug, Clone, Args)]
pub struct GcArgs {
    /// Which repository (`--repo`); by default the one containing the current directory, if
    /// any. Without one, gc removes only what lies outside any repository: the temp dirs and
    /// cgroups of runs that are gone, and the clean rooms of repositories that are gone.
    #[command(flatten)]
    pub repo: super::RepoArg,
    /// Also delete the branches (with their kept work trees and transcripts) of runs finished
    /// longer ago than AGE, its unit spelled out: `14days`, `2weeks`, `12hours`, `90minutes`,
    /// `1month` (`14d`, `2w`, `12h` too; `1m` is refused as it could be either).
    #[arg(long, value_name = "AGE", value_parser = crate::runs::age::parse_duration)]
    pub older_than: Option<i64>,
    /// Also delete the branches of runs that did not pass (with --older-than: only those).
    #[arg(long)]
    pub failed: bool,
    /// With --older-than: passed runs not yet applied go too. Without it they are kept (and
    /// named): they are work nobody has used yet. `agent-git discard RUN` deletes one by name.
    #[arg(long)]
    pub include_unapplied: bool,
    /// Say which runs --failed and --older-than would delete and which they keep; remove
    /// nothing at all.
    #[arg(long)]
    pub dry_run: bool,
}

/// Removes the work trees, temp dirs and cgroups of runs that are gone (killed, or the machine
/// went down), and the work trees and clean rooms kept for the next runs; a run still going
/// keeps everything. Branches stay unless --older-than or --failed asks for them.
pub fn run(args: GcArgs) -> Result<u8, CliError> {
    let repo = args.repo.open_if_any()?;
    if args.include_unapplied && args.older_than.is_none() {
        return Err(CliError::Usage(
            "--include-unapplied goes with --older-than (--failed never deletes a passed run)"
                .into(),
        ));
    }
    if args.dry_run {
        let Some(repo) = &repo else {
            return Err(CliError::Usage(
                "--dry-run needs a repository; run in one or pass --repo PATH".into(),
            ));
        };
        return dry_run(repo, &args);
    }
    let swept = crate::workspace::sweep::sweep_leftovers(repo.as_ref());
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
        let emptied = crate::workspace::sweep::empty_pool(repo);
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
            .map(|(temp, objects)| crate::workspace::sweep::empty_rooms(&temp, &objects))
            .unwrap_or_default();
        if !rooms.is_empty() {
            let paths: Vec<String> = rooms.iter().map(|p| p.display().to_string()).collect();
            println!(
                "agent-git gc: removed the clean rooms kept for the next runs: {}",
                paths.join(", ")
            );
        }
    }
    let orphans = crate::workspace::sweep::sweep_orphans(&std::env::temp_dir());
    if !orphans.is_empty() {
        let paths: Vec<String> = orphans.iter().map(|p| p.display().to_string()).collect();
        println!(
            "agent-git gc: removed the clean rooms of repositories that are gone: {}",
            paths.join(", ")
        );
    }
    Ok(code)
}

fn doom(args: &GcArgs) -> crate::runs::Doom {
    crate::runs::Doom {
        failed: args.failed,
        older_than: args.older_than,
        unapplied_passes: args.include_unapplied,
    }
}

/// Deletes the runs asked for, skipping (and naming) the ones that may not go.
fn delete_runs(repo: &git2::Repository, args: &GcArgs) -> Result<u8, CliError> {
    let runs = crate::runs::list(repo)?;
    let now = crate::runs::now();
    let (doomed, kept) = crate::runs::doomed(&runs, doom(args), now);
    for run in doomed {
        match crate::runs::discard(repo, run) {
            Ok(()) => println!(
                "deleted branch {} (run {}, {})",
                run.branch, run.run_id, run.outcome
            ),
            Err(e) if e.is_refusal() => println!("kept branch {}: {e}", run.branch),
            Err(e) => return Err(e.into()),
        }
    }
    for run in kept {
        println!("kept branch {}: {}", run.branch, UNAPPLIED);
    }
    Ok(0)
}

const UNAPPLIED: &str = "it passed and is not applied yet (--include-unapplied deletes it too)";

/// What `gc` would delete and keep of the runs; nothing is removed.
fn dry_run(repo: &git2::Repository, args: &GcArgs) -> Result<u8, CliError> {
    let runs = crate::runs::list(repo)?;
    let (doomed, kept) = crate::runs::doomed(&runs, doom(args), crate::runs::now());
    for run in doomed {
        println!(
            "would delete branch {} (run {}, {})",
            run.branch, run.run_id, run.outcome
        );
    }
    for run in kept {
        println!("would keep branch {}: {}", run.branch, UNAPPLIED);
    }
    println!("agent-git gc --dry-run: nothing was removed");
    Ok(0)
}
