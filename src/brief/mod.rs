//! What the model is told first, besides the task and the first test result: the
//! repository's instructions for agents (and, as it comes, the failing tests' context and a
//! map of the repository). Pure: files come in through a reader of the base commit.

mod instructions;

pub use instructions::{Instructions, INSTRUCTION_FILES, MAX_INSTRUCTION_BYTES};

use crate::testrun::TestResult;

/// Reads a file of the base commit as text.
pub type Reader = Box<dyn Fn(&str) -> Option<String>>;

/// The base commit's files, and what to make of them for the first message.
pub struct Brief {
    pub instructions: Option<Instructions>,
    /// The tracked paths of the base commit.
    pub files: Vec<String>,
    pub read: Reader,
}

impl Brief {
    pub fn new(files: Vec<String>, read: Reader) -> Self {
        Brief {
            instructions: Instructions::find(&read),
            files,
            read,
        }
    }

    /// The sections of the first message that follow the first test result.
    pub fn sections(&self, _initial: &TestResult) -> Vec<String> {
        Vec::new()
    }
}
