//! What the setup command (an install step) made, kept across resets until its inputs or
//! its outputs change.

use super::walk::{Stamp, TreeWalk, Walk};
use super::CleanRoom;
use crate::workspace::WorkspaceError;
use git2::Oid;
use std::collections::BTreeSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;

/// Files whose change makes a setup command (an install step) run again.
const SETUP_INPUTS: &[&str] = &[
    "package.json",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "Pipfile",
    "Pipfile.lock",
    "poetry.lock",
    "uv.lock",
    "Cargo.toml",
    "Cargo.lock",
    "go.mod",
    "go.sum",
    "Gemfile",
    "Gemfile.lock",
];

impl CleanRoom {
    /// Whether the setup command must run (again) before testing `tree`: it never ran, the
    /// files it depends on changed, or what it made was changed since.
    pub fn needs_setup(&mut self, tree: Oid) -> Result<bool, WorkspaceError> {
        self.settle()?;
        let Some((inputs, outputs)) = self.setup_state else {
            return Ok(true);
        };
        Ok(inputs != self.setup_inputs(tree)? || outputs != self.outputs_digest()?)
    }

    /// Removes whatever an earlier setup made, so that it runs from scratch.
    pub fn clear_setup(&mut self) -> Result<(), WorkspaceError> {
        self.settle()?;
        self.setup_since_reset = true;
        for rel in std::mem::take(&mut self.setup_outputs) {
            self.remove_in_tree(&rel)?;
        }
        self.setup_state = None;
        self.setup_from = None;
        Ok(())
    }

    /// Notes what a setup command that just succeeded made, to keep it across resets.
    pub fn record_setup(&mut self, tree: Oid) -> Result<(), WorkspaceError> {
        self.settle()?;
        self.setup_since_reset = true;
        let snapshot = self.snapshot.as_ref().ok_or_else(|| {
            WorkspaceError::Unsafe("the clean room lost track of what it holds".to_string())
        })?;
        // What the snapshot of the checkout does not know is the setup's: the top-most new
        // entries, untracked or ignored alike. Every entry is looked at, earlier outputs too.
        let walk = TreeWalk {
            skip: BTreeSet::new(),
            ..self.tree_walk()
        };
        let parts = walk.walk(&|rel, _, _, made: &mut Vec<PathBuf>| {
            if snapshot.contains(walk.key(rel)) {
                return Ok(Walk::On);
            }
            made.push(rel.to_path_buf());
            Ok(Walk::SkipDir)
        })?;
        self.setup_outputs = parts.into_iter().flatten().collect();
        self.setup_state = Some((self.setup_inputs(tree)?, self.outputs_digest()?));
        self.setup_from = Some(tree);
        Ok(())
    }

    /// Whether what the setup command made comes from another tree than the one checked out:
    /// it may depend on files it was not known to read.
    pub fn setup_is_stale(&self) -> bool {
        self.setup_from.is_some() && self.setup_from != self.current
    }

    /// Whether what the setup command made comes from a tree other than `tree`.
    pub fn setup_is_from_another(&self, tree: Oid) -> bool {
        self.setup_from.is_some_and(|from| from != tree)
    }

    /// A digest of the blobs of `tree` that a setup command depends on.
    fn setup_inputs(&self, tree: Oid) -> Result<u64, WorkspaceError> {
        let tree = self.repo.find_tree(tree)?;
        let mut hasher = DefaultHasher::new();
        crate::workspace::entries::each_entry(&self.repo, &tree, &mut |dir, entry| {
            if let Ok(name) = entry.name() {
                let requirements = (name.starts_with("requirements")
                    || name.starts_with("constraints"))
                    && name.ends_with(".txt");
                if requirements || SETUP_INPUTS.contains(&name) {
                    (dir, name, entry.id()).hash(&mut hasher);
                }
            }
            true
        })?;
        Ok(hasher.finish())
    }

    /// A digest of the stat data of everything the setup command made: any change to it
    /// (a test run patching a dependency, say) is seen before the next run.
    fn outputs_digest(&self) -> Result<u64, WorkspaceError> {
        let mut hasher = DefaultHasher::new();
        for rel in &self.setup_outputs {
            let root = self.tree.join(rel);
            // One a test run removed (or put a link in place of) makes the setup run again.
            match std::fs::symlink_metadata(&root) {
                Ok(meta) if !meta.is_symlink() => {}
                found => {
                    (rel, found.is_ok()).hash(&mut hasher);
                    continue;
                }
            }
            let walk = walkdir::WalkDir::new(root)
                .follow_links(false)
                .sort_by_file_name();
            for entry in walk {
                let entry = entry?;
                let meta = entry.metadata()?;
                (entry.path(), meta.len(), Stamp::of(&meta)).hash(&mut hasher);
            }
        }
        Ok(hasher.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{commit_files, read, repo_with};
    use super::*;
    use std::path::Path;

    #[test]
    fn setup_outputs_survive_resets_until_they_or_their_inputs_change() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, tree) = repo_with(
            dir.path(),
            &[("package.json", "{}"), (".gitignore", "node_modules/\n")],
        );
        let mut room = CleanRoom::create(&repo.path().join("objects"), repo.workdir()).unwrap();
        room.reset_to(tree).unwrap();
        assert!(room.needs_setup(tree).unwrap());
        let modules = room.path().join("node_modules/dep");
        std::fs::create_dir_all(&modules).unwrap();
        std::fs::write(modules.join("index.js"), "module.exports = 1;").unwrap();
        room.record_setup(tree).unwrap();
        room.reset_to(tree).unwrap();
        assert!(modules.join("index.js").exists(), "kept across a reset");
        assert!(!room.needs_setup(tree).unwrap());

        // A test run that patches a dependency makes the setup run again.
        std::fs::write(modules.join("index.js"), "module.exports = 2;").unwrap();
        assert!(room.needs_setup(tree).unwrap());
        room.clear_setup().unwrap();
        assert!(!room.path().join("node_modules").exists());

        // So does a change to what it depends on.
        std::fs::create_dir_all(&modules).unwrap();
        room.record_setup(tree).unwrap();
        let mut index = repo.index().unwrap();
        std::fs::write(dir.path().join("package.json"), "{\"dependencies\": {}}").unwrap();
        index.add_path(Path::new("package.json")).unwrap();
        let changed = index.write_tree().unwrap();
        assert!(room.needs_setup(changed).unwrap());
    }

    /// What the setup command made becomes a tracked file of the next tree.
    #[test]
    fn a_setup_output_that_becomes_tracked_is_not_removed_from_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, first) = repo_with(dir.path(), &[("calc.py", "x = 1\n")]);
        let mut room = CleanRoom::create(&repo.path().join("objects"), repo.workdir()).unwrap();
        room.reset_to(first).unwrap();
        assert!(room.needs_setup(first).unwrap());
        room.clear_setup().unwrap();
        std::fs::write(room.path().join("gen.py"), "generated\n").unwrap();
        room.record_setup(first).unwrap();
        room.undo_in_background();
        // The model commits its own gen.py.
        let second = commit_files(&repo, &[("gen.py", "committed\n")], &[]);
        room.reset_to(second).unwrap();
        if room.needs_setup(second).unwrap() {
            room.clear_setup().unwrap();
            // This setup makes nothing this time.
            room.record_setup(second).unwrap();
        }
        assert_eq!(read(&room, "gen.py"), "committed\n");
    }
}
