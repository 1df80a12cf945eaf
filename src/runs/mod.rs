//! The repository's agent runs, read from git. A branch is an agent run when its tip is a
//! report commit: empty, authored by agent-git, with `Agent-Run` and `Agent-Outcome`
//! trailers. A run still going is found by its live lease instead. Writing (apply, discard)
//! goes through `workspace`.

pub mod age;
mod describe;
mod list;
pub mod message;
mod sets;

pub use list::{list, resolve};
pub use sets::{chosen_run, resolve_named, sets, sets_table, show_set, AttemptSet, Named};

use crate::workspace::discard::DiscardError;
use crate::workspace::land::LandError;
use crate::workspace::WorkspaceError;
use git2::{Oid, Repository};
use serde_json::{json, Value};

/// One run, as its branch and report commit tell it.
#[derive(Debug, Clone)]
pub struct Run {
    /// The `Agent-Run` trailer: eight hex digits.
    pub run_id: String,
    /// The run's branch, without `refs/heads/`.
    pub branch: String,
    /// The branch's tip: the report commit of a finished run.
    pub tip: Oid,
    /// A process still works on it: it has no report yet.
    pub running: bool,
    /// The commit the run started from (the report's `Base:` line).
    pub base: Option<Oid>,
    /// The report's `Task:`; empty while running.
    pub task: String,
    /// The `Agent-Outcome` trailer (`passed`, `turn-limit`); `running` or `no-report` without one.
    pub outcome: String,
    /// The `Agent-Tests` trailer, as written; `-` while running.
    pub tests: String,
    /// The `Agent-Turns` trailer, as written; `-` while running.
    pub turns: String,
    /// The `Agent-Cost` trailer, as written; `-` while running.
    pub cost: String,
    /// The `Agent-Model` trailer; empty while running.
    pub model: String,
    /// When the report was committed (or the run started), in seconds since the epoch.
    pub time: i64,
    /// The commit on one of your branches that applied it (or merged it), if any.
    pub applied: Option<Oid>,
    /// The report commit's whole message (empty while running).
    pub report: String,
    /// Which attempt of a set (`fix --attempts`) the run was.
    pub attempt: Option<crate::attempts::AttemptOf>,
}

/// Why a command on a repository's runs changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum RunsError {
    /// The query names no run or set.
    #[error("no agent run matches `{0}`; `agent-git runs --all` lists them (branch or run id)")]
    Unknown(String),
    /// A prefix the query is of more than one run's id or branch.
    #[error(
        "`{query}` matches several runs ({}); give more of the run id, or the whole branch name",
        .matches.join(", ")
    )]
    Ambiguous {
        /// What the user gave.
        query: String,
        /// The branches (or set ids) it could mean.
        matches: Vec<String>,
    },
    /// The run has no report yet.
    #[error("run {0} is still going; wait for it to end (`agent-git runs` shows when it has)")]
    Running(String),
    /// The run's branch holds no commit but its report.
    #[error("run {0} made no change to apply (its branch holds no edit)")]
    NoEdits(String),
    /// `apply --required-only` cannot tell, or the required changes alone fail.
    #[error("{0}")]
    NotProven(String),
    /// `agent-git transcript` found no transcript note on the run.
    #[error(
        "run {0} has no stored transcript (made before transcripts were kept in git, or removed)"
    )]
    NoTranscript(String),
    /// Applying the run to the current branch failed or was refused.
    #[error(transparent)]
    Land(#[from] LandError),
    /// Deleting the run's branch, notes or work tree failed or was refused.
    #[error(transparent)]
    Discard(#[from] DiscardError),
    /// Reading the run's commits or notes failed.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// git failed.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

impl RunsError {
    /// Whether nothing was changed because of what the user asked or has (exit 2), rather
    /// than git failing under agent-git (exit 4).
    pub fn is_refusal(&self) -> bool {
        !matches!(
            self,
            RunsError::Land(LandError::Git(_))
                | RunsError::Discard(DiscardError::Git(_) | DiscardError::Note(_))
                | RunsError::Workspace(_)
                | RunsError::Git(_)
        )
    }
}

impl Run {
    /// The run's last edit: the report commit's parent (the base when it made none).
    pub fn last_edit(&self, repo: &Repository) -> Result<Oid, git2::Error> {
        if self.outcome == NO_REPORT {
            return Ok(self.tip);
        }
        repo.find_commit(self.tip)?.parent_id(0)
    }

    /// `running`, else the outcome.
    pub fn state(&self) -> &str {
        if self.running {
            "running"
        } else {
            &self.outcome
        }
    }

    /// The object `agent-git runs --json` prints for this run.
    pub fn json(&self, now: i64) -> Value {
        json!({
            "run_id": self.run_id,
            "branch": self.branch,
            "running": self.running,
            "outcome": (!self.running).then_some(&self.outcome),
            "tests": self.tests,
            // Numbers, as `fix --json` has them; null where the report did not say.
            "turns": self.turns.parse::<u64>().ok(),
            "cost_usd": self
                .cost
                .strip_suffix(" USD")
                .and_then(|c| c.parse::<f64>().ok()),
            "model": self.model,
            "task": self.task,
            "base": self.base.map(|b| b.to_string()),
            "tip": self.tip.to_string(),
            "time": self.time,
            "age_seconds": now - self.time,
            "applied": self.applied.map(|a| a.to_string()),
            "attempt": self.attempt,
        })
    }
}

/// The widest a line of `agent-git runs` is.
const TABLE_WIDTH: usize = 100;

/// The table `agent-git runs` prints: one line per run, newest first, at most 100 columns
/// wide (long branch names are cut in the middle; the run id names a run as well).
pub fn table(runs: &[Run], now: i64) -> String {
    let header = [
        "BRANCH", "RUN", "OUTCOME", "TESTS", "TURNS", "COST", "AGE", "APPLIED",
    ];
    let mut rows: Vec<[String; 8]> = runs
        .iter()
        .map(|r| {
            [
                r.branch.clone(),
                r.run_id.clone(),
                r.state().to_string(),
                tests_cell(&r.tests),
                r.turns.clone(),
                cost_cell(&r.cost),
                age::format_age(now - r.time),
                r.applied
                    .map_or("-".to_string(), |a| a.to_string()[..7].to_string()),
            ]
        })
        .collect();
    let measure = |rows: &[[String; 8]]| {
        let mut widths = header.map(str::len);
        for row in rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        widths
    };
    let mut widths = measure(&rows);
    // Too wide: the branch is cut in the middle first (its run id stays), then the tests.
    for (column, least) in [(0, 16), (3, 12)] {
        let total = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
        let over = total.saturating_sub(TABLE_WIDTH);
        if over == 0 {
            break;
        }
        let room = widths[column].saturating_sub(over).max(least);
        for row in &mut rows {
            row[column] = match column {
                0 => cut_in_the_middle(&row[column], room),
                _ => crate::text::truncate(&row[column], room),
            };
        }
        widths = measure(&rows);
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:width$}"))
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in &rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// `text` at most `max` characters long, its middle replaced by `...` when cut: the end of a
/// branch name (the run id) stays.
fn cut_in_the_middle(text: &str, max: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= max {
        return text.to_string();
    }
    let keep = max.saturating_sub(3);
    let head = keep / 2;
    let tail = keep - head;
    let start: String = chars[..head].iter().collect();
    let end: String = chars[chars.len() - tail..].iter().collect();
    format!("{start}...{end}")
}

/// `2 passed, 0 failed, 1 skipped` as `2 passed, 1 skipped`: counts of none left out.
fn tests_cell(trailer: &str) -> String {
    let parts: Vec<&str> = trailer
        .split(", ")
        .filter(|part| !part.starts_with("0 "))
        .collect();
    match parts.is_empty() {
        true => trailer.to_string(),
        false => parts.join(", "),
    }
}

/// `0.0123 USD` as `$0.0123`; an unknown cost as `-`.
fn cost_cell(trailer: &str) -> String {
    match trailer.strip_suffix(" USD") {
        Some(amount) => format!("${amount}"),
        None => "-".to_string(),
    }
}

/// The outcome of a run that ended without its report commit.
pub const NO_REPORT: &str = "no-report";

/// What `agent-git show` prints: the report, the run's commits, the diffstat.
pub fn show(repo: &Repository, run: &Run) -> Result<String, RunsError> {
    let mut out = String::new();
    if run.running {
        out.push_str(&format!(
            "run {} on branch {} is still going\n",
            run.run_id, run.branch
        ));
    } else if run.outcome == NO_REPORT {
        out.push_str(&format!(
            "run {} on branch {} ended without a report (it was killed, or interrupted \
             twice); `agent-git discard {}` deletes it\n",
            run.run_id, run.branch, run.run_id
        ));
    } else {
        out.push_str(run.report.trim_end());
        out.push('\n');
    }
    if let Some(applied) = run.applied {
        out.push_str(&format!("\nApplied in {applied}\n"));
    }
    out.push_str("\nCommits:\n");
    let mut walk = repo.revwalk()?;
    walk.push(run.tip)?;
    if let Some(base) = run.base {
        walk.hide(base)?;
    }
    let mut attempts = Vec::new();
    for oid in walk {
        let commit = repo.find_commit(oid?)?;
        let summary = String::from_utf8_lossy(commit.summary_bytes().unwrap_or_default());
        out.push_str(&format!("  {} {summary}\n", &commit.id().to_string()[..7]));
        let message = String::from_utf8_lossy(commit.message_bytes()).into_owned();
        if let Some(outcome) = list::trailers(&message).remove("Agent-Outcome") {
            attempts.push(format!(
                "  {} {outcome}: {summary}",
                &commit.id().to_string()[..7]
            ));
        }
    }
    // A resumed run has a report commit per attempt; the newest is the one shown above.
    if attempts.len() > 1 {
        out.push_str("\nAttempts, newest first:\n");
        out.push_str(&attempts.join("\n"));
        out.push('\n');
    }
    let Some(base) = run.base else {
        return Ok(out);
    };
    out.push_str("\nDiffstat (base..branch):\n");
    out.push_str(&stat_lines(repo, base, run.tip)?);
    Ok(out)
}

/// The files changed from `base` to `tip`, a line each with lines added and removed.
fn stat_lines(repo: &Repository, base: Oid, tip: Oid) -> Result<String, RunsError> {
    let old = repo.find_commit(base)?.tree()?;
    let new = repo.find_commit(tip)?.tree()?;
    let files = crate::workspace::diffstat(repo, &old, &new)?;
    if files.is_empty() {
        return Ok("  no files changed\n".to_string());
    }
    Ok(files
        .iter()
        .map(|file| format!("  {}\n", message::stat_line(file)))
        .collect())
}

/// What `agent-git show --stat` prints: the run, and the files it changed.
pub fn show_stat(repo: &Repository, run: &Run) -> Result<String, RunsError> {
    let mut out = format!(
        "run {} on branch {}: {}\n",
        run.run_id,
        run.branch,
        run.state()
    );
    match run.base {
        Some(base) => out.push_str(&stat_lines(repo, base, run.tip)?),
        None => out.push_str("  its base is not known: no files to show\n"),
    }
    Ok(out)
}

/// The patch from the run's base to its branch (the report commit changes nothing), as
/// `git diff BASE..BRANCH` prints it.
pub fn patch(repo: &Repository, run: &Run) -> Result<String, RunsError> {
    let Some(base) = run.base else {
        return Ok("its base is not known: no patch to show\n".to_string());
    };
    let old = repo.find_commit(base)?.tree()?;
    let new = repo.find_commit(run.tip)?.tree()?;
    let diff = crate::workspace::trees::diff(repo, Some(&old), Some(&new), None)?;
    let mut text = Vec::new();
    diff.print(git2::DiffFormat::Patch, |_, _, line| {
        if matches!(line.origin(), '+' | '-' | ' ') {
            text.push(line.origin() as u8);
        }
        text.extend_from_slice(line.content());
        true
    })?;
    Ok(String::from_utf8_lossy(&text).into_owned())
}

/// Lands the run on the current branch: one commit (or a merge, `keep_history`).
pub fn apply(repo: &Repository, run: &Run, keep_history: bool) -> Result<Oid, RunsError> {
    if run.running {
        return Err(RunsError::Running(run.run_id.clone()));
    }
    let base = run
        .base
        .ok_or_else(|| RunsError::NoEdits(run.run_id.clone()))?;
    let work = run.last_edit(repo)?;
    if work == base {
        return Err(RunsError::NoEdits(run.run_id.clone()));
    }
    let old = repo.find_commit(base)?.tree()?;
    let new = repo.find_commit(work)?.tree()?;
    let files = crate::workspace::diffstat(repo, &old, &new)?;
    let description = describe::model_description(repo, work, base)?;
    let text = message::landing(run, description.as_deref(), &files, keep_history, 0);
    let reflog = format!("agent-git apply: run {}", run.run_id);
    let landing = crate::workspace::land::Landing {
        branch: &run.branch,
        base,
        work,
        keep_history,
        message: &text,
        reflog: &reflog,
    };
    Ok(crate::workspace::land::land(repo, &landing)?)
}

/// Lands only the changes of `run` its tests require (`apply --required-only`): the base with
/// every change the proof found required, tested in a clean room before it is committed.
/// Returns the landed commit and how many changes were left out.
pub fn apply_required(
    repo: &Repository,
    run: &Run,
    progress: &mut dyn FnMut(&str),
) -> Result<(Oid, usize), RunsError> {
    use crate::verify::hunks;
    if run.running {
        return Err(RunsError::Running(run.run_id.clone()));
    }
    let base = run
        .base
        .ok_or_else(|| RunsError::NoEdits(run.run_id.clone()))?;
    let trailers = list::trailers(&run.report);
    let not_proven = || {
        RunsError::NotProven(format!(
            "run {} has no proof of which changes its tests require (it did not pass, or the \
             proof was skipped: see its report); apply it whole, or run it again with \
             --prove-hunks",
            run.run_id
        ))
    };
    let unrequired = trailers.get("Agent-Unrequired").ok_or_else(not_proven)?;
    let proven = trailers
        .get("Agent-Proven-Tree")
        .and_then(|id| Oid::from_str(id).ok())
        .ok_or_else(not_proven)?;
    let left_out: Vec<usize> = match unrequired.as_str() {
        "none" => Vec::new(),
        list => list
            .split(',')
            .map(|n| n.trim().parse::<usize>())
            .collect::<Result<_, _>>()
            .map_err(|_| not_proven())?,
    };
    if left_out.is_empty() {
        progress("every change is required by the tests: the run is applied whole");
        return Ok((apply(repo, run, false)?, 0));
    }
    let base_tree = repo.find_commit(base)?.tree_id();
    let changes = hunks::changes(repo, base_tree, proven)?;
    if left_out.iter().any(|&i| i >= changes.len()) {
        return Err(not_proven());
    }
    let tree = hunks::tree_without(repo, base_tree, proven, &changes, &left_out)?;
    let signature = git2::Signature::now("agent-git", "agent-git@localhost")?;
    let message = format!(
        "agent-git: the changes of run {} its tests require\n",
        run.run_id
    );
    let candidate = repo.commit(
        None,
        &signature,
        &signature,
        &message,
        &repo.find_tree(tree)?,
        &[&repo.find_commit(base)?],
    )?;
    let mut checker = crate::check::Checker::new(repo);
    match checker.check(candidate, progress) {
        crate::check::Verdict::Passed { .. } => {}
        crate::check::Verdict::Failed(result) => {
            return Err(RunsError::NotProven(format!(
                "without the {} changes its tests do not require one by one, run {}'s tests \
                 fail ({}): together they are needed; apply it whole",
                left_out.len(),
                run.run_id,
                result.summary()
            )))
        }
        crate::check::Verdict::CannotRun(why) => {
            return Err(RunsError::NotProven(format!(
                "the required changes of run {} could not be tested: {why}",
                run.run_id
            )))
        }
    }
    let old = repo.find_tree(base_tree)?;
    let files = crate::workspace::diffstat(repo, &old, &repo.find_tree(tree)?)?;
    let description = describe::model_description(repo, run.last_edit(repo)?, base)?;
    let text = message::landing(run, description.as_deref(), &files, false, left_out.len());
    let reflog = format!("agent-git apply --required-only: run {}", run.run_id);
    let landing = crate::workspace::land::Landing {
        branch: &run.branch,
        base,
        work: candidate,
        keep_history: false,
        message: &text,
        reflog: &reflog,
    };
    Ok((
        crate::workspace::land::land(repo, &landing)?,
        left_out.len(),
    ))
}

/// Deletes a finished run: its branch, its kept work tree and its transcript.
pub fn discard(repo: &Repository, run: &Run) -> Result<(), RunsError> {
    if run.running {
        return Err(RunsError::Running(run.run_id.clone()));
    }
    let doomed = crate::workspace::discard::Doomed {
        branch: &run.branch,
        run_id: &run.run_id,
        report: run.tip,
    };
    Ok(crate::workspace::discard::discard(repo, &doomed)?)
}

/// The conversation stored with the run's report commit.
pub fn transcript(repo: &Repository, run: &Run) -> Result<Value, RunsError> {
    crate::workspace::notes::read_transcript(repo, run.tip)?
        .ok_or_else(|| RunsError::NoTranscript(run.run_id.clone()))
}

/// What `agent-git gc` deletes of finished runs: failed ones (`failed`), ones older than
/// `older_than` seconds, or, given both, runs that are both. Given neither, none.
#[derive(Debug, Clone, Copy, Default)]
pub struct Doom {
    /// Runs whose outcome is not `passed`.
    pub failed: bool,
    /// Runs at least this many seconds old.
    pub older_than: Option<i64>,
    /// Passed runs not yet applied go too: they are work nobody has used yet, so only this
    /// says they may go.
    pub unapplied_passes: bool,
}

/// The runs `doom` deletes, and the passed ones not yet applied that it would have deleted
/// but keeps.
pub fn doomed(runs: &[Run], doom: Doom, now: i64) -> (Vec<&Run>, Vec<&Run>) {
    if !doom.failed && doom.older_than.is_none() {
        return (Vec::new(), Vec::new());
    }
    runs.iter()
        .filter(|r| !r.running)
        .filter(|r| !doom.failed || r.outcome != "passed")
        .filter(|r| doom.older_than.is_none_or(|age| now - r.time >= age))
        .partition(|r| doom.unapplied_passes || r.outcome != "passed" || r.applied.is_some())
}

/// Seconds since the epoch, as run times are kept; 0 before it.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(branch: &str, tests: &str) -> Run {
        Run {
            run_id: "8c1d2e3f".into(),
            branch: branch.into(),
            tip: git2::Oid::ZERO_SHA1,
            running: false,
            base: None,
            task: String::new(),
            outcome: "tests-cannot-run".into(),
            tests: tests.into(),
            turns: "30".into(),
            cost: "12.3456 USD".into(),
            model: String::new(),
            time: 0,
            applied: None,
            report: String::new(),
            attempt: None,
        }
    }

    #[test]
    fn the_table_fits_in_100_columns_and_keeps_the_end_of_a_long_branch() {
        let long = "agent/the-tests-in-test-calc-py-fail-find-the-bug-and-fix-it-8c1d2e3f";
        let wide = table(
            &[run(long, "277 passed, 0 failed, 12 skipped, 3 vanished")],
            3 * 86_400,
        );
        for line in wide.lines() {
            assert!(
                line.chars().count() <= 100,
                "{} columns: {line}",
                line.len()
            );
        }
        let row = wide.lines().nth(1).unwrap();
        assert!(row.starts_with("agent/...c1d2e3f  8c1d2e3f  "), "{row}");
        assert!(
            row.contains("277 passed, 12 skipp...  30"),
            "no zero counts, then cut: {row}"
        );
        let fits = table(&[run(long, "3 passed, 1 failed")], 0);
        assert!(fits.contains("3 passed, 1 failed  30"), "{fits}");
        let short = table(&[run("agent/calc", "2 passed, 0 failed")], 0);
        assert!(short.contains("agent/calc  8c1d2e3f"), "{short}");
        assert!(short.contains("  2 passed  "), "{short}");
    }
}
