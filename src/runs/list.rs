//! Finding the runs: report commits at branch tips, live leases, and the commits of your
//! branches that applied them.

use super::{Run, RunsError};
use crate::workspace::AGENT_EMAIL;
use git2::{BranchType, Commit, Oid, Repository};
use std::collections::HashMap;

/// Every agent run of the repository, newest first.
pub fn list(repo: &Repository) -> Result<Vec<Run>, RunsError> {
    let mut runs = Vec::new();
    let mut others = Vec::new();
    for branch in repo.branches(Some(BranchType::Local))? {
        let (branch, _) = branch?;
        let (Ok(Some(name)), Some(tip)) = (branch.name(), branch.get().target()) else {
            continue;
        };
        match repo
            .find_commit(tip)
            .ok()
            .and_then(|c| finished_run(&c, name))
        {
            Some(run) => runs.push(run),
            None => others.push((name.to_string(), tip)),
        }
    }
    for (run_id, branch) in live_runs(repo) {
        others.retain(|(name, _)| *name != branch);
        match runs.iter_mut().find(|r| r.branch == branch) {
            Some(run) => run.running = true,
            None => runs.extend(running_run(repo, &run_id, &branch)),
        }
    }
    for noted in crate::workspace::discard::unreported(repo) {
        if runs
            .iter()
            .any(|r| r.branch == noted.branch || r.run_id == noted.run_id)
        {
            continue;
        }
        let Some(run) = unreported_run(repo, noted) else {
            continue;
        };
        others.retain(|(name, _)| *name != run.branch);
        runs.push(run);
    }
    let tips: Vec<Oid> = others.iter().map(|(_, tip)| *tip).collect();
    mark_applied(repo, &mut runs, &tips)?;
    runs.sort_by(|a, b| b.time.cmp(&a.time).then_with(|| a.branch.cmp(&b.branch)));
    Ok(runs)
}

/// The run whose report commit `tip` is, if it is one.
fn finished_run(tip: &Commit, branch: &str) -> Option<Run> {
    let message = String::from_utf8_lossy(tip.message_bytes()).into_owned();
    let empty = tip.parent_count() == 1 && tip.parent(0).ok()?.tree_id() == tip.tree_id();
    if !empty || tip.author().email_bytes() != AGENT_EMAIL.as_bytes() {
        return None;
    }
    let trailers = trailers(&message);
    let get = |key: &str| trailers.get(key).cloned();
    if trailers.contains_key("Agent-Applied") {
        return None;
    }
    // A branch is the run only under the name the run gave it: another branch pointing at
    // the same report (the user's own) is not, and is never discarded as one. Reports made
    // before the trailer existed count on agent-git's own branch prefix.
    let own_name = match get("Agent-Branch") {
        Some(name) => name == branch,
        None => branch.starts_with("agent/"),
    };
    if !own_name {
        return None;
    }
    // The base is read from the trailer, which the task cannot forge; older reports from
    // their `Base:` line.
    let base = get("Agent-Base")
        .or_else(|| body_line(&message, "Base: ").map(str::to_string))
        .and_then(|b| b.split_whitespace().next().map(str::to_string))
        .and_then(|b| Oid::from_str(&b).ok());
    Some(Run {
        run_id: get("Agent-Run")?,
        outcome: get("Agent-Outcome")?,
        branch: branch.to_string(),
        tip: tip.id(),
        running: false,
        base,
        task: task_of(&message),
        tests: get("Agent-Tests").unwrap_or_default(),
        turns: get("Agent-Turns").unwrap_or_default(),
        cost: get("Agent-Cost").unwrap_or_default(),
        model: get("Agent-Model").unwrap_or_default(),
        time: tip.committer().when().seconds(),
        applied: None,
        attempt: get("Agent-Attempt").and_then(|t| crate::attempts::AttemptOf::parse(&t)),
        report: message,
    })
}

/// A message's trailers, as git reads them (the last value of a key wins).
pub(crate) fn trailers(message: &str) -> HashMap<String, String> {
    let Ok(parsed) = git2::message_trailers_strs(message) else {
        return HashMap::new();
    };
    parsed
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The report's task: its `Task:` line and the indented lines that go on from it.
fn task_of(message: &str) -> String {
    let mut lines = message.lines().skip_while(|l| !l.starts_with("Task: "));
    let Some(first) = lines.next() else {
        return String::new();
    };
    let mut task = first.trim_start_matches("Task: ").to_string();
    for line in lines.take_while(|l| l.starts_with("  ")) {
        task.push('\n');
        task.push_str(&line[2..]);
    }
    task
}

/// The rest of the first body line starting with `prefix`.
fn body_line<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    message.lines().find_map(|l| l.strip_prefix(prefix))
}

/// The runs in progress: (run id, branch) of each lease a live run holds.
fn live_runs(repo: &Repository) -> Vec<(String, String)> {
    let dir = repo.commondir().join("agent-git");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut live = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(run_id) = name.strip_suffix(".lease") else {
            continue;
        };
        if !crate::workspace::discard::is_running(repo, run_id) {
            continue;
        }
        let head = repo
            .commondir()
            .join("worktrees")
            .join(format!("agent-git-{run_id}"))
            .join("HEAD");
        let branch = std::fs::read_to_string(head).ok().and_then(|text| {
            let name = text.trim().strip_prefix("ref: refs/heads/")?.to_string();
            Some(name)
        });
        if let Some(branch) = branch {
            live.push((run_id.to_string(), branch));
        }
    }
    live
}

/// A run still going, with what its branch says so far.
fn running_run(repo: &Repository, run_id: &str, branch: &str) -> Option<Run> {
    let tip = repo
        .find_branch(branch, BranchType::Local)
        .ok()?
        .get()
        .target()?;
    let lease = crate::workspace::discard::lease_path(repo, run_id);
    let started = std::fs::metadata(lease)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0));
    Some(Run {
        run_id: run_id.to_string(),
        branch: branch.to_string(),
        tip,
        running: true,
        base: None,
        task: String::new(),
        outcome: "running".to_string(),
        tests: "-".to_string(),
        turns: "-".to_string(),
        cost: "-".to_string(),
        model: String::new(),
        time: started,
        applied: None,
        attempt: None,
        report: String::new(),
    })
}

/// A run whose branch has no report: still going (a pooled work tree, which `live_runs` does
/// not find by name), or ended without one (outcome `no-report`), so that `discard` and `gc`
/// reach it and its name can be had again. None when its branch is gone.
fn unreported_run(repo: &Repository, noted: crate::workspace::discard::Unreported) -> Option<Run> {
    if crate::workspace::discard::is_running(repo, &noted.run_id) {
        return running_run(repo, &noted.run_id, &noted.branch);
    }
    let tip = repo
        .find_branch(&noted.branch, BranchType::Local)
        .ok()?
        .get()
        .target()?;
    Some(Run {
        run_id: noted.run_id,
        branch: noted.branch,
        tip,
        running: false,
        base: noted.base,
        task: String::new(),
        outcome: super::NO_REPORT.to_string(),
        tests: "-".to_string(),
        turns: "-".to_string(),
        cost: "-".to_string(),
        model: String::new(),
        time: noted.started,
        applied: None,
        attempt: None,
        report: String::new(),
    })
}

/// Marks each finished run applied by the first commit of your branches (`tips`) that names it
/// in an `Agent-Applied` trailer, else by the first of them holding its last edit (a plain
/// `git merge`). First is the oldest, then the smallest id: never the first branch by name.
fn mark_applied(repo: &Repository, runs: &mut [Run], tips: &[Oid]) -> Result<(), RunsError> {
    if runs.is_empty() || tips.is_empty() {
        return Ok(());
    }
    let by_trailer = applying_commits(repo, runs, tips)?;
    for run in runs.iter_mut().filter(|r| !r.running) {
        run.applied = match by_trailer.get(&run.run_id) {
            Some(commit) => Some(*commit),
            None => merged_by_git(repo, run, tips)?,
        };
    }
    Ok(())
}

/// The first commit in your branches' history naming each run in an `Agent-Applied` trailer.
fn applying_commits(
    repo: &Repository,
    runs: &[Run],
    tips: &[Oid],
) -> Result<HashMap<String, Oid>, RunsError> {
    let mut walk = repo.revwalk()?;
    for tip in tips {
        walk.push(*tip)?;
    }
    if let Some(floor) = ancestor_of_every_base(repo, runs) {
        walk.hide(floor)?;
    }
    let mut first: HashMap<String, (i64, Oid)> = HashMap::new();
    for oid in walk {
        let commit = repo.find_commit(oid?)?;
        let message = String::from_utf8_lossy(commit.message_bytes());
        if !message.contains("Agent-Applied:") {
            continue;
        }
        if let Some(run_id) = trailers(&message).remove("Agent-Applied") {
            let found = (commit.time().seconds(), commit.id());
            first
                .entry(run_id)
                .and_modify(|known| *known = (*known).min(found))
                .or_insert(found);
        }
    }
    Ok(first
        .into_iter()
        .map(|(run_id, (_, commit))| (run_id, commit))
        .collect())
}

/// A commit every finished run's base descends from: older than every run, so neither it nor
/// its ancestors can have applied one. An octopus merge base, since `merge_base_many` answers
/// for the first base against the rest and could hide the commit that applied another run.
fn ancestor_of_every_base(repo: &Repository, runs: &[Run]) -> Option<Oid> {
    let bases: Option<Vec<Oid>> = runs.iter().filter(|r| !r.running).map(|r| r.base).collect();
    match bases?.as_slice() {
        [] => None,
        [one] => Some(*one),
        many => repo.merge_base_octopus(many).ok(),
    }
}

/// The first branch tip (oldest, then smallest id) holding the run's last edit, when one does
/// (a plain `git merge`).
fn merged_by_git(repo: &Repository, run: &Run, tips: &[Oid]) -> Result<Option<Oid>, RunsError> {
    let work = run.last_edit(repo)?;
    if Some(work) == run.base {
        return Ok(None);
    }
    let mut holding = Vec::new();
    for tip in tips {
        if *tip == work || *tip == run.tip || repo.graph_descendant_of(*tip, work)? {
            holding.push((repo.find_commit(*tip)?.time().seconds(), *tip));
        }
    }
    Ok(holding.into_iter().min().map(|(_, tip)| tip))
}

/// The run named by `query`: a whole branch name or run id, else the one run whose id or
/// branch starts with it.
pub fn resolve<'a>(runs: &'a [Run], query: &str) -> Result<&'a Run, RunsError> {
    if let Some(run) = runs.iter().find(|r| r.branch == query || r.run_id == query) {
        return Ok(run);
    }
    let matches: Vec<&Run> = runs
        .iter()
        .filter(|r| r.run_id.starts_with(query) || r.branch.starts_with(query))
        .collect();
    match matches.as_slice() {
        [one] => Ok(one),
        [] => Err(RunsError::Unknown(query.to_string())),
        many => Err(RunsError::Ambiguous {
            query: query.to_string(),
            matches: many.iter().map(|r| r.branch.clone()).collect(),
        }),
    }
}
