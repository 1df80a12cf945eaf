//! Transcripts of runs, kept in git: one note per report commit under `refs/notes/agent-git`,
//! holding the conversation as JSON. A note is reachable from the notes ref, so `git gc`
//! keeps it; removing one also drops the ref's history, so the text really goes.

use super::{dates, WorkspaceError, AGENT_EMAIL, AGENT_NAME};
use git2::{Oid, Repository};
use serde_json::Value;

/// The notes ref that holds the transcripts.
pub const TRANSCRIPTS_REF: &str = "refs/notes/agent-git";

/// Stores `transcript` as the note of `report` (replacing one already there).
pub fn store_transcript(
    repo: &Repository,
    report: Oid,
    transcript: &Value,
) -> Result<Oid, WorkspaceError> {
    let text = serde_json::to_string_pretty(transcript)
        .map_err(|e| WorkspaceError::Unsafe(format!("cannot write the transcript: {e}")))?;
    let sig = dates::signature(AGENT_NAME, AGENT_EMAIL, "GIT_COMMITTER_DATE")?;
    // Runs ending at the same time (the attempts of a set) take turns at the notes ref.
    let mut waited = std::time::Duration::ZERO;
    loop {
        match repo.note(&sig, &sig, Some(TRANSCRIPTS_REF), report, &text, true) {
            Err(e) if e.code() == git2::ErrorCode::Locked && waited < LOCK_PATIENCE => {
                let pause = std::time::Duration::from_millis(20);
                std::thread::sleep(pause);
                waited += pause;
            }
            stored => return Ok(stored?),
        }
    }
}

/// How long a run waits for another to be done with the notes ref.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// The transcript stored on `report`, if any.
pub fn read_transcript(repo: &Repository, report: Oid) -> Result<Option<Value>, WorkspaceError> {
    let note = match repo.find_note(Some(TRANSCRIPTS_REF), report) {
        Ok(note) => note,
        Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let text = String::from_utf8_lossy(note.message_bytes());
    let value = serde_json::from_str(&text).map_err(|e| {
        WorkspaceError::Unsafe(format!(
            "the transcript note of {report} is not JSON ({e}); read it with \
             `git notes --ref agent-git show {report}`"
        ))
    })?;
    Ok(Some(value))
}

/// Removes the notes of `reports` and rewrites the notes ref as one commit without parents,
/// so the removed transcripts are unreachable and the next `git gc` deletes them.
pub fn remove_transcripts(repo: &Repository, reports: &[Oid]) -> Result<usize, WorkspaceError> {
    let sig = dates::signature(AGENT_NAME, AGENT_EMAIL, "GIT_COMMITTER_DATE")?;
    let mut removed = 0;
    for report in reports {
        match repo.note_delete(*report, Some(TRANSCRIPTS_REF), &sig, &sig) {
            Ok(()) => removed += 1,
            Err(e) if e.code() == git2::ErrorCode::NotFound => {}
            Err(e) => return Err(e.into()),
        }
    }
    if removed > 0 {
        forget_history(repo, &sig)?;
    }
    Ok(removed)
}

/// Points the notes ref at a fresh root commit with its current tree; a run adding a note
/// meanwhile makes the swap fail rather than lose that note.
fn forget_history(repo: &Repository, sig: &git2::Signature) -> Result<(), WorkspaceError> {
    let current = repo.find_reference(TRANSCRIPTS_REF)?;
    let tip = current.peel_to_commit()?;
    let tree = tip.tree()?;
    let message = "agent-git: transcripts of the runs that still have branches\n";
    let fresh = repo.commit(None, sig, sig, message, &tree, &[])?;
    repo.reference_matching(
        TRANSCRIPTS_REF,
        fresh,
        true,
        tip.id(),
        "agent-git: drop removed transcripts",
    )?;
    // The reflog of a notes ref would keep the old commits, and so the removed text, alive.
    repo.reflog_delete(TRANSCRIPTS_REF)?;
    Ok(())
}
