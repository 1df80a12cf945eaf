//! `agent-git hook install` and `uninstall`: agent-git's pre-push hook in the repository's
//! hooks directory. A pre-push hook that is there already is moved aside, not overwritten;
//! ours runs it first, and uninstall moves it back exactly as it was (a rename keeps its
//! bytes, mode and even its inode).

use git2::Repository;
use std::path::{Path, PathBuf};

/// The script installed: the same as `hooks/pre-push` in agent-git's repository.
pub const HOOK_SCRIPT: &str = include_str!("../../hooks/pre-push");

/// The line that marks a pre-push hook as agent-git's.
const MARKER: &str = "# agent-git-hook: pre-push";

/// Where the hook that was there before waits; git itself never runs a file of this name.
pub const CHAINED: &str = "pre-push.agent-git-chained";

/// What installing the pre-push hook did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installed {
    /// There was no pre-push hook.
    Fresh,
    /// The hook that was there was moved to `CHAINED` and runs first.
    Chained,
    /// An older version of agent-git's hook was replaced.
    Updated,
    /// This version's hook was there already; nothing changed.
    AlreadyInstalled,
}

/// What removing the pre-push hook did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uninstalled {
    /// agent-git's hook is gone; no hook was kept from before it.
    Removed,
    /// The hook that was there before is back.
    Restored,
    /// The pre-push hook is not agent-git's, or there is none; nothing changed.
    NotInstalled,
}

/// The directory git runs the repository's hooks from: `core.hooksPath` (relative to the
/// working tree's root, as git reads it), else `hooks` in the common git dir (shared by
/// linked worktrees).
pub fn hooks_dir(repo: &Repository) -> Result<PathBuf, String> {
    let config = repo
        .config()
        .map_err(|e| format!("cannot read git config: {e}"))?;
    match config.get_path("core.hooksPath") {
        Ok(path) if path.is_absolute() => Ok(path),
        Ok(path) => Ok(repo.workdir().unwrap_or(repo.path()).join(path)),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(repo.commondir().join("hooks")),
        Err(e) => Err(format!("cannot read core.hooksPath: {e}")),
    }
}

/// Installs the hook in `dir`, keeping a hook that is there. Refuses, changing nothing, when
/// the directory holds what an earlier install left in a state it cannot have made.
pub fn install(dir: &Path) -> Result<Installed, String> {
    let hook = dir.join("pre-push");
    let chained = dir.join(CHAINED);
    match (kind(&hook)?, kind(&chained)?.is_some()) {
        (Some(Kind::Ours(text)), _) if text == HOOK_SCRIPT => Ok(Installed::AlreadyInstalled),
        (Some(Kind::Ours(_)), _) => write_hook(&hook).map(|_| Installed::Updated),
        (Some(Kind::Other), false) => {
            std::fs::rename(&hook, &chained).map_err(|e| {
                format!(
                    "cannot move {} to {}: {e}",
                    hook.display(),
                    chained.display()
                )
            })?;
            write_hook(&hook).map(|_| Installed::Chained)
        }
        (Some(Kind::Other), true) => Err(format!(
            "{} is not agent-git's, and {} (the hook an earlier install kept) is there too; \
             move one of them away, then run `agent-git hook install` again",
            hook.display(),
            chained.display()
        )),
        (None, true) => Err(format!(
            "{} is there but no pre-push hook is: an earlier install was undone by hand; move \
             it back to {} or remove it, then run `agent-git hook install` again",
            chained.display(),
            hook.display()
        )),
        (None, false) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            write_hook(&hook).map(|_| Installed::Fresh)
        }
    }
}

/// Removes agent-git's hook from `dir` and moves back the one it kept. Refuses, changing
/// nothing, when the pre-push hook there is not agent-git's but a kept one waits.
pub fn uninstall(dir: &Path) -> Result<Uninstalled, String> {
    let hook = dir.join("pre-push");
    let chained = dir.join(CHAINED);
    match (kind(&hook)?, kind(&chained)?.is_some()) {
        (Some(Kind::Ours(_)), true) => std::fs::rename(&chained, &hook)
            .map(|_| Uninstalled::Restored)
            .map_err(|e| format!("cannot move {} back: {e}", chained.display())),
        (Some(Kind::Ours(_)), false) => std::fs::remove_file(&hook)
            .map(|_| Uninstalled::Removed)
            .map_err(|e| format!("cannot remove {}: {e}", hook.display())),
        (_, true) => Err(format!(
            "the pre-push hook in {} is not agent-git's, but {} (a hook agent-git kept) is \
             there; decide which to keep and move the other away by hand",
            dir.display(),
            chained.display()
        )),
        (_, false) => Ok(Uninstalled::NotInstalled),
    }
}

/// The first comment line of the helper that earlier versions had users copy by hand.
const OLD_HELPER_HEADER: &str = "# agent-git pre-push helper.";

enum Kind {
    /// agent-git's hook, with its text.
    Ours(String),
    Other,
}

/// What is at `path`: nothing, agent-git's hook or something else. A directory there is an
/// error: git could not run it, and agent-git will not move it.
fn kind(path: &Path) -> Result<Option<Kind>, String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot inspect {}: {e}", path.display())),
    };
    if meta.is_dir() {
        return Err(format!(
            "{} is a directory; move it away, then run the command again",
            path.display()
        ));
    }
    if !meta.is_file() && !meta.file_type().is_symlink() {
        return Ok(Some(Kind::Other));
    }
    // Read through a link too: a link to agent-git's own script is ours, and keeping it as
    // the hook to run first would have the hook call itself for ever.
    let Ok(text) = std::fs::read(path) else {
        return Ok(Some(Kind::Other));
    };
    let text = String::from_utf8_lossy(&text).into_owned();
    let ours = text.lines().any(|l| l == MARKER || l == OLD_HELPER_HEADER);
    Ok(Some(if ours { Kind::Ours(text) } else { Kind::Other }))
}

/// Writes the hook whole or not at all (a temp file renamed into place), executable.
fn write_hook(hook: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let dir = hook.parent().unwrap_or(Path::new("."));
    let fail = |e: std::io::Error| format!("cannot write {}: {e}", hook.display());
    let temp = tempfile::Builder::new()
        .prefix(".pre-push.agent-git-")
        .tempfile_in(dir)
        .map_err(fail)?;
    std::fs::write(temp.path(), HOOK_SCRIPT).map_err(fail)?;
    std::fs::set_permissions(temp.path(), std::fs::Permissions::from_mode(0o755)).map_err(fail)?;
    temp.persist(hook).map_err(|e| fail(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_script_carries_the_marker() {
        assert!(HOOK_SCRIPT.lines().any(|l| l == MARKER));
    }

    #[test]
    fn install_and_uninstall_refuse_odd_states_and_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let chained = dir.path().join(CHAINED);
        std::fs::write(&chained, "#!/bin/sh\nexit 0\n").unwrap();
        let err = install(dir.path()).unwrap_err();
        assert!(err.contains("no pre-push hook is"), "{err}");
        assert!(!dir.path().join("pre-push").exists());
        std::fs::write(dir.path().join("pre-push"), "#!/bin/sh\nexit 1\n").unwrap();
        assert!(install(dir.path()).unwrap_err().contains("too"));
        assert!(uninstall(dir.path()).unwrap_err().contains("by hand"));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("pre-push")).unwrap(),
            "#!/bin/sh\nexit 1\n"
        );
    }

    #[test]
    fn a_link_to_our_own_script_and_the_old_helper_are_ours_never_chained() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("agent-git-pre-push");
        std::fs::write(&script, HOOK_SCRIPT).unwrap();
        let hook = dir.path().join("pre-push");
        std::os::unix::fs::symlink(&script, &hook).unwrap();
        assert_eq!(install(dir.path()), Ok(Installed::AlreadyInstalled));
        assert!(
            !dir.path().join(CHAINED).exists(),
            "never chained to itself"
        );

        std::fs::remove_file(&hook).unwrap();
        let old = "#!/bin/sh\n# agent-git pre-push helper.\n#\n# Before a push, ...\n";
        std::fs::write(&hook, old).unwrap();
        assert_eq!(install(dir.path()), Ok(Installed::Updated));
        assert_eq!(std::fs::read_to_string(&hook).unwrap(), HOOK_SCRIPT);
        assert!(!dir.path().join(CHAINED).exists());
    }

    #[test]
    fn an_older_hook_of_ours_is_updated_and_installing_twice_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let hook = dir.path().join("pre-push");
        std::fs::write(&hook, format!("#!/bin/sh\n{MARKER}\nold\n")).unwrap();
        assert_eq!(install(dir.path()), Ok(Installed::Updated));
        assert_eq!(std::fs::read_to_string(&hook).unwrap(), HOOK_SCRIPT);
        assert_eq!(install(dir.path()), Ok(Installed::AlreadyInstalled));
        assert!(!dir.path().join(CHAINED).exists());
        assert_eq!(uninstall(dir.path()), Ok(Uninstalled::Removed));
        assert_eq!(uninstall(dir.path()), Ok(Uninstalled::NotInstalled));
    }
}
