//! What the model is told first, besides the task and the first test result: the
//! repository's instructions for agents, the failing tests' context, and a map of the
//! repository ranked by what the failure is about. Pure: files come in as paths and a reader
//! of the base commit, text goes out.

mod failures;
mod frames;
mod imports;
mod instructions;
mod lang;
mod locate;
mod map;
mod outline;
mod rank;

pub use failures::failing_context;
pub use instructions::{Instructions, INSTRUCTION_FILES, MAX_INSTRUCTION_BYTES};
pub use map::repo_map;
pub use rank::Focus;

/// Compiles the patterns that reading failures for the brief needs, so that the first brief
/// does not wait for them: for a thread of its own while the base's tests run.
pub fn warm_up() {
    frames::warm_up();
    imports::warm_up();
}

use crate::testrun::TestResult;

/// Reads a file of the base commit as text.
pub type Reader = Box<dyn Fn(&str) -> Option<String>>;
/// Lists the regular files of the base commit, when the brief is written: on a large
/// repository the list costs megabytes, and no longer than the brief needs it.
pub type Lister = Box<dyn Fn() -> Vec<String>>;
/// Makes another `Reader` of the same commit, with a repository handle of its own: for a
/// thread that reads beside the brief's own (None where the repository cannot be opened).
pub type Readers = dyn Fn() -> Option<Reader> + Send + Sync;

/// The most the failing tests' context may take, in bytes.
const MAX_FAILURE_CONTEXT_BYTES: usize = 8_000;
/// The brief's parts may each take at most this share of a small context window.
const WINDOW_SHARE: u64 = 16;

/// The base commit's files, and what to make of them for the first message.
pub struct Brief {
    /// The repository's `AGENTS.md` (or `CLAUDE.md`), capped; None without one.
    pub instructions: Option<Instructions>,
    /// The regular files of the base commit.
    pub files: Lister,
    /// Reads a file of the base commit, for the instructions, the tests' context and the map.
    pub read: Reader,
    /// The map's budget in tokens; 0 leaves the map out.
    pub map_tokens: usize,
    /// The most the failing tests' context may take, in bytes: 8000, or less where a small
    /// context window's share is smaller.
    pub failure_bytes: usize,
    /// Where the map's search may read in a second thread: None reads in one.
    pub beside: Option<Box<Readers>>,
}

impl Brief {
    /// `map_tokens` is the map's budget; a small context window lowers it, and the room
    /// for the failing tests, to a sixteenth of the window each.
    pub fn new(files: Lister, read: Reader, map_tokens: usize, window: Option<u64>) -> Self {
        let share = window.map_or(usize::MAX, |w| {
            usize::try_from(w / WINDOW_SHARE).unwrap_or(usize::MAX)
        });
        Brief {
            instructions: Instructions::find(&read),
            files,
            read,
            map_tokens: map_tokens.min(share),
            failure_bytes: MAX_FAILURE_CONTEXT_BYTES.min(share.saturating_mul(4)),
            beside: None,
        }
    }

    /// The map's search reads in two threads, the second with readers `readers` makes.
    pub fn reading_beside(mut self, readers: Box<Readers>) -> Self {
        self.beside = Some(readers);
        self
    }

    /// The sections of the first message that follow the first test result: the failing
    /// tests' source and traceback lines, then the map.
    pub fn sections(&self, initial: &TestResult) -> Vec<String> {
        let mut sections = Vec::new();
        if initial.passed && self.map_tokens == 0 {
            return sections;
        }
        let files = (self.files)();
        // Indexed once: on 100,000 files each index of them took 13 ms.
        let repo = frames::RepoFiles::new(&files);
        if !initial.passed {
            let context =
                failures::context_in(initial, &repo, &files, &self.read, self.failure_bytes);
            if !context.is_empty() {
                sections.push(format!(
                    "The failing tests, and the repository lines their tracebacks pass \
                     through:\n\n{context}"
                ));
            }
        }
        if self.map_tokens > 0 {
            let focus = Focus::of(initial, &repo);
            let beside = self.beside.as_deref();
            let map = map::map_in(&repo, &self.read, &focus, self.map_tokens, beside);
            if !map.is_empty() {
                sections.push(format!(
                    "A map of the repository's source files and their definitions (line \
                     numbers first), the files nearest the failure first:\n\n{map}"
                ));
            }
        }
        sections
    }
}
