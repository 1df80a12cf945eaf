//! The build cache of the test runs (`CARGO_TARGET_DIR`), kept in the room between runs,
//! and a fresh one for a run that must not read what earlier runs wrote.

use super::CleanRoom;
use crate::workspace::{remove_entry, WorkspaceError};
use std::path::PathBuf;

impl CleanRoom {
    /// The build cache of the test runs (`CARGO_TARGET_DIR`): the harness's, not the model's.
    pub fn cargo_target(&self) -> PathBuf {
        self.root().join("cargo-target")
    }

    /// Where a build cache for one run from scratch goes, beside the shared one.
    fn fresh_cargo_target_dir(&self) -> PathBuf {
        self.root().join("cargo-target-fresh")
    }

    /// An empty build cache beside the shared one, for a run that must not read what earlier
    /// runs wrote.
    pub fn fresh_cargo_target(&self) -> Result<PathBuf, WorkspaceError> {
        let fresh = self.fresh_cargo_target_dir();
        remove_entry(&fresh)?;
        std::fs::create_dir(&fresh).map_err(|e| WorkspaceError::io("create", &fresh, e))?;
        Ok(fresh)
    }

    /// The fresh cache becomes the shared one (its test run wrote to it as well, so a later
    /// pass is confirmed again).
    pub fn adopt_fresh_cache(&mut self) -> Result<(), WorkspaceError> {
        let shared = self.cargo_target();
        let fresh = self.fresh_cargo_target_dir();
        remove_entry(&shared)?;
        std::fs::rename(&fresh, &shared).map_err(|e| WorkspaceError::io("keep", &fresh, e))?;
        self.cache_written = true;
        Ok(())
    }

    /// Records that a test run built into the shared build cache: a later pass that used it is
    /// confirmed with a fresh cache.
    pub fn note_cache_written(&mut self) {
        self.cache_written = true;
    }

    /// Whether a test run has built into the shared build cache since it was last fresh, so a pass
    /// on it may rest on what an earlier tree built.
    pub fn cache_was_written(&self) -> bool {
        self.cache_written
    }
}
