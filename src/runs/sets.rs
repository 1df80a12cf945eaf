//! The attempt sets of the repository (`fix --attempts`), read from their stored summaries.

use super::{Run, RunsError};
use crate::workspace::sets::{is_set_id, stored_sets};
use git2::Repository;

/// One set, as its summary's trailers tell it.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptSet {
    pub id: String,
    /// The chosen run's id, if an attempt ended with a report.
    pub chosen: Option<String>,
    /// Every attempt's run id, in attempt order (an attempt that never started has none).
    pub runs: Vec<String>,
    pub attempts: usize,
    /// The summary as printed when the set ended.
    pub message: String,
    pub time: i64,
}

/// Every set, newest first.
pub fn sets(repo: &Repository) -> Result<Vec<AttemptSet>, RunsError> {
    Ok(stored_sets(repo)?
        .into_iter()
        .map(|stored| {
            let trailers = super::list::trailers(&stored.message);
            let runs: Vec<String> = trailers
                .get("Agent-Attempt-Runs")
                .filter(|r| r.as_str() != "none")
                .map(|r| r.split(',').map(|id| id.trim().to_string()).collect())
                .unwrap_or_default();
            AttemptSet {
                id: stored.id,
                chosen: trailers.get("Agent-Chosen").cloned(),
                attempts: trailers
                    .get("Agent-Attempts")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(runs.len()),
                runs,
                message: stored.message,
                time: stored.time,
            }
        })
        .collect())
}

/// The set `query` names: its whole id, or a prefix of it of at least five characters.
pub fn find_set<'a>(sets: &'a [AttemptSet], query: &str) -> Option<&'a AttemptSet> {
    if !is_set_id(query) {
        return None;
    }
    if let Some(exact) = sets.iter().find(|s| s.id == query) {
        return Some(exact);
    }
    let mut found = sets
        .iter()
        .filter(|s| query.len() >= 5 && s.id.starts_with(query));
    match (found.next(), found.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// What `agent-git runs` prints of the sets after the runs: one line each.
pub fn sets_table(sets: &[AttemptSet], runs: &[Run], now: i64) -> String {
    let mut out = String::from(
        "\nAttempt sets (agent-git show SET; agent-git apply SET lands the chosen run):\n",
    );
    for set in sets {
        let chosen = match &set.chosen {
            Some(id) => match runs.iter().find(|r| &r.run_id == id) {
                Some(run) => format!("chosen {id} ({})", run.state()),
                None => format!("chosen {id} (discarded)"),
            },
            None => "none chosen".to_string(),
        };
        out.push_str(&format!(
            "  {}  {} attempts  {chosen}  {}\n",
            set.id,
            set.attempts,
            super::age::format_age(now - set.time)
        ));
    }
    out
}

/// The run a set chose, or why there is none to apply.
pub fn chosen_run(set: &AttemptSet) -> Result<&str, RunsError> {
    set.chosen.as_deref().ok_or_else(|| {
        RunsError::NotProven(format!(
            "set {} chose no run: none of its attempts ended with a report",
            set.id
        ))
    })
}

/// What `agent-git show SET` prints: the summary, and which of its runs are still there.
pub fn show_set(set: &AttemptSet, runs: &[Run]) -> String {
    let mut out = set.message.trim_end().to_string();
    out.push_str("\n\nRuns now:\n");
    for id in &set.runs {
        let state = match runs.iter().find(|r| &r.run_id == id) {
            Some(run) if run.applied.is_some() => {
                format!("{} on {}, applied", run.state(), run.branch)
            }
            Some(run) => format!("{} on {}", run.state(), run.branch),
            None => "discarded".to_string(),
        };
        out.push_str(&format!("  {id}  {state}\n"));
    }
    if set.runs.is_empty() {
        out.push_str("  none\n");
    }
    out
}
