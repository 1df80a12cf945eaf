//! What the model is told first: the failing tests' context and a map of the repository.
//! Pure: files come in as paths and a reader, text goes out.

mod failures;
mod frames;
mod lang;
mod locate;
mod outline;

pub use failures::failing_context;
