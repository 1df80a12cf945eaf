//! `agent-git transcript RUN`: prints the conversation stored with a run (as JSON).

use super::CliError;
use clap::Args;

/// What `agent-git transcript` takes: the run.
#[derive(Debug, Clone, Args)]
pub struct TranscriptArgs {
    /// The run: its branch or run id, or an unambiguous prefix of either.
    pub run: String,
    /// Which repository (`--repo`); by default the one containing the current directory.
    #[command(flatten)]
    pub repo: super::RepoArg,
}

/// Prints the conversation stored with the run, as indented JSON. Exit code 0.
pub fn run(args: TranscriptArgs) -> Result<u8, CliError> {
    let repo = args.repo.open()?;
    let runs = crate::runs::list(&repo)?;
    let run = crate::runs::resolve(&runs, &args.run)?;
    let transcript = crate::runs::transcript(&repo, run)?;
    let text = serde_json::to_string_pretty(&transcript)
        .map_err(|e| CliError::Harness(format!("cannot print the transcript: {e}")))?;
    println!("{text}");
    Ok(0)
}
