//! The attempt sets of the repository (`fix --attempts`), read from their stored summaries.

use super::{Run, RunsError};
use crate::workspace::sets::{is_set_id, stored_sets};
use git2::Repository;

/// One set, as its summary's trailers tell it.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptSet {
    /// `s` and hex digits, as `fix --attempts` printed it.
    pub id: String,
    /// The chosen run's id, if an attempt ended with a report.
    pub chosen: Option<String>,
    /// Every attempt's run id, in attempt order (an attempt that never started has none).
    pub runs: Vec<String>,
    /// How many attempts were asked for (`Agent-Attempts`), else how many runs there are.
    pub attempts: usize,
    /// The summary as printed when the set ended.
    pub message: String,
    /// When the summary was stored, in seconds since the epoch.
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

/// What a query names: a run, or a set of attempts.
#[derive(Debug, Clone, Copy)]
pub enum Named<'a> {
    /// A run, by its id or branch.
    Run(&'a Run),
    /// A set of attempts, by its id.
    Set(&'a AttemptSet),
}

/// The run or set `query` names. A whole run id or branch name, or a whole set id, wins;
/// else a prefix of a run id or branch, or of a set id (five characters at least), that only
/// one of them has. A query that names both is refused as ambiguous.
pub fn resolve_named<'a>(
    runs: &'a [Run],
    sets: &'a [AttemptSet],
    query: &str,
) -> Result<Named<'a>, RunsError> {
    let whole_run = runs.iter().find(|r| r.branch == query || r.run_id == query);
    let whole_set = sets.iter().find(|s| s.id == query);
    let ambiguous = |matches: Vec<String>| RunsError::Ambiguous {
        query: query.to_string(),
        matches,
    };
    match (whole_run, whole_set) {
        (Some(run), Some(set)) => return Err(ambiguous(vec![run.branch.clone(), set.id.clone()])),
        (Some(run), None) => return Ok(Named::Run(run)),
        (None, Some(set)) => return Ok(Named::Set(set)),
        (None, None) => {}
    }
    let set_matches: Vec<&AttemptSet> = match is_set_id(query) && query.len() >= 5 {
        true => sets.iter().filter(|s| s.id.starts_with(query)).collect(),
        false => Vec::new(),
    };
    let run = super::resolve(runs, query);
    match (run, set_matches.as_slice()) {
        (Ok(run), []) => Ok(Named::Run(run)),
        (Err(RunsError::Unknown(_)), [set]) => Ok(Named::Set(set)),
        (Err(e), []) => Err(e),
        (Err(RunsError::Unknown(_)), many) => {
            Err(ambiguous(many.iter().map(|s| s.id.clone()).collect()))
        }
        (Ok(run), many) => Err(ambiguous(
            [run.branch.clone()]
                .into_iter()
                .chain(many.iter().map(|s| s.id.clone()))
                .collect(),
        )),
        (Err(e), _) => Err(e),
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
pub fn chosen_run<'a>(set: &AttemptSet, runs: &'a [Run]) -> Result<&'a Run, RunsError> {
    let Some(id) = set.chosen.as_deref() else {
        return Err(RunsError::NotProven(format!(
            "set {} chose no run: none of its attempts ended with a report",
            set.id
        )));
    };
    runs.iter().find(|r| r.run_id == id).ok_or_else(|| {
        RunsError::NotProven(format!(
            "run {id}, the one set {} chose, is gone (discarded); `agent-git show {}` lists \
             its other attempts",
            set.id, set.id
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

#[cfg(test)]
mod tests {
    use super::*;

    fn run(run_id: &str, branch: &str) -> Run {
        Run {
            run_id: run_id.into(),
            branch: branch.into(),
            tip: git2::Oid::ZERO_SHA1,
            running: false,
            base: None,
            task: String::new(),
            outcome: "passed".into(),
            tests: String::new(),
            turns: String::new(),
            cost: String::new(),
            model: String::new(),
            time: 0,
            applied: None,
            report: String::new(),
            attempt: None,
        }
    }

    fn set(id: &str) -> AttemptSet {
        AttemptSet {
            id: id.into(),
            chosen: Some("64974329".into()),
            runs: vec!["64974329".into()],
            attempts: 2,
            message: String::new(),
            time: 0,
        }
    }

    fn named(runs: &[Run], sets: &[AttemptSet], query: &str) -> Result<String, String> {
        match resolve_named(runs, sets, query) {
            Ok(Named::Run(r)) => Ok(format!("run {}", r.branch)),
            Ok(Named::Set(s)) => Ok(format!("set {}", s.id)),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn a_whole_name_wins_and_a_query_naming_a_run_and_a_set_is_ambiguous() {
        let runs = [
            run("64974329", "agent/fix-64974329"),
            run("95817370", "sd3e7"),
            run("12345678", "sd3e76-other"),
        ];
        let sets = [set("sd3e7618d"), set("s3b00aaaa"), set("s3b00bbbb")];
        assert_eq!(
            named(&runs, &sets, "sd3e7"),
            Ok("run sd3e7".into()),
            "a whole branch"
        );
        assert_eq!(named(&runs, &sets, "sd3e7618d"), Ok("set sd3e7618d".into()));
        assert_eq!(named(&runs, &sets, "9581"), Ok("run sd3e7".into()));
        let both = named(&runs, &sets, "sd3e76").unwrap_err();
        assert!(both.contains("sd3e76-other, sd3e7618d"), "{both}");
        let two_sets = named(&runs, &sets, "s3b00").unwrap_err();
        assert!(two_sets.contains("s3b00aaaa, s3b00bbbb"), "{two_sets}");
        assert!(named(&runs, &sets, "zzz")
            .unwrap_err()
            .contains("no agent run matches"));
        assert_eq!(chosen_run(&sets[0], &runs).unwrap().run_id, "64974329");
        let gone = chosen_run(&sets[0], &runs[1..]).unwrap_err().to_string();
        assert!(gone.contains("is gone (discarded)"), "{gone}");
    }
}
