//! agent-git: a git-native coding agent. The binary is a thin shell over this library.

pub mod guard;
pub mod model;
pub mod testrun;
pub mod workspace;
pub mod tools;
pub mod verify;
pub mod agent;
pub mod report;
pub mod run;
pub mod settings;
pub mod cli;
