//! Evals: task suites, repeated runs of the real binary, statistics and reports, and tasks
//! made from real fix commits.

pub mod html;
pub mod import;
pub mod report;
pub mod results;
pub mod runner;
pub mod stats;
pub mod swebench;
pub mod task;

use std::path::Path;

/// Why an eval command could not go on.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A task directory that cannot be used; says which and why.
    #[error("{0}")]
    Task(String),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file, as shown.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
    /// git failed; the text is its error.
    #[error("git: {0}")]
    Git(String),
    /// A results file that cannot be read.
    #[error("{0}")]
    Results(String),
    /// An import refused: the fix commit does not make a valid task.
    #[error("{0}")]
    Refused(String),
}

impl EvalError {
    /// An `Io` error about `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        EvalError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}
