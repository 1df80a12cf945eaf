//! What the model is told first: the failing tests' context and a map of the repository.
//! Pure: files come in as paths and a reader, text goes out.

mod failures;
mod frames;
mod imports;
mod lang;
mod locate;
mod map;
mod outline;
mod rank;

pub use failures::failing_context;
pub use map::repo_map;
pub use rank::Focus;
