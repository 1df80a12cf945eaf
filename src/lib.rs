//! agent-git: a git-native coding agent. The binary is a thin shell over this library.

#![warn(missing_docs)]

pub mod agent;
pub mod attempts;
pub mod brief;
pub mod check;
pub mod children;
pub mod cli;
pub mod eval;
pub mod files;
pub mod guard;
pub mod leftovers;
pub mod memory;
pub mod model;
pub mod prepare;
pub mod report;
pub mod run;
pub mod runs;
pub mod sandbox;
pub mod secrets;
pub mod settings;
pub mod start;
pub mod testrun;
pub mod text;
pub mod tools;
pub mod verify;
pub mod workspace;
