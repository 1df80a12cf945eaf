//! The integration tests: the real binary on real temporary repositories. One test binary, so
//! the crate is linked once; each module tells one part of the story.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

mod api_failures;
mod attempts;
mod brief;
mod common;
mod completions;
mod ends;
mod eval;
mod evals;
mod fix;
mod hook;
mod layouts;
mod models;
mod overlay;
mod passed;
mod prompt_cache;
mod protection;
mod proven;
mod responses;
mod runners;
mod runs;
mod sandbox;
mod scale_setup;
mod scale_tools;
mod schema;
mod setup;
mod start;
mod streaming;
mod tree_cache;
