//! Every clean-up of what runs leave behind, in one place: the temp dirs, work trees, pool
//! slots and cgroups of runs that died without cleaning up (SIGKILL, a power cut), found by
//! their leases (`crate::leftovers`), and what `agent-git gc` empties on request (the work
//! trees and clean rooms kept for the next runs, the rooms of repositories that are gone).
//! Nothing of a run still going is touched.

use super::pool;
use super::rooms;
use crate::leftovers::{is_abandoned, remove_forcibly, LEASE, TEMP_PREFIXES};
use git2::Repository;
use std::path::{Path, PathBuf};

/// What a sweep removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Swept {
    /// Temp dirs left by runs now gone, removed: sandbox dirs, clean rooms, check folders.
    pub temp_dirs: Vec<PathBuf>,
    /// The run ids whose work trees were removed (their branches stay).
    pub worktrees: Vec<String>,
    /// How many cgroups left by sandbox helpers of an agent-git now gone were removed.
    pub cgroups: usize,
}

impl Swept {
    /// Nothing was removed.
    pub fn is_empty(&self) -> bool {
        self.temp_dirs.is_empty() && self.worktrees.is_empty() && self.cgroups == 0
    }

    /// One line: what was removed, for runs that did not finish.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.worktrees.is_empty() {
            parts.push(format!(
                "the work trees of runs {} (their branches stay)",
                self.worktrees.join(", ")
            ));
        }
        if !self.temp_dirs.is_empty() {
            let dirs: Vec<String> = self
                .temp_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect();
            parts.push(format!("temp dirs {}", dirs.join(", ")));
        }
        if self.cgroups > 0 {
            parts.push(format!("{} cgroups", self.cgroups));
        }
        if parts.is_empty() {
            return "nothing left over by earlier runs".into();
        }
        format!(
            "removed what earlier runs that did not finish left behind: {}",
            parts.join("; ")
        )
    }
}

/// Removes what runs that are gone left behind: their temp dirs, cgroups and, in `repo`,
/// work trees. Nothing of a run still going is touched.
pub fn sweep_leftovers(repo: Option<&Repository>) -> Swept {
    Swept {
        temp_dirs: sweep_temp_dirs(&std::env::temp_dir()),
        worktrees: repo.map(sweep_abandoned_worktrees).unwrap_or_default(),
        cgroups: sweep_cgroups(),
    }
}

/// Removes the temp dirs in `temp` that runs now gone left behind, and says which.
pub fn sweep_temp_dirs(temp: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !TEMP_PREFIXES.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let dir = entry.path();
        // Only this user's: in a temp dir others share, another user's look-alike (lease and
        // all) is none of a sweep's business, however it is built.
        let ours = |path: &Path| {
            use std::os::unix::fs::MetadataExt;
            std::fs::symlink_metadata(path)
                .is_ok_and(|m| m.uid() == rustix::process::geteuid().as_raw())
        };
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let lease = dir.join(LEASE);
        if is_dir
            && ours(&dir)
            && ours(&lease)
            && is_abandoned(&lease)
            && remove_forcibly(&dir).is_ok()
        {
            removed.push(dir);
        }
    }
    removed.sort();
    removed
}

/// Removes the work trees that runs now gone left in `repo` (killed, or the machine went
/// down), and says which runs they were. Their branches stay: they are the user's to review.
pub fn sweep_abandoned_worktrees(repo: &Repository) -> Vec<String> {
    let parent = repo.commondir().join("agent-git");
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return Vec::new();
    };
    let mut swept = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(run_id) = path
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| !pool::is_slot_lease(n))
            .and_then(|n| n.strip_suffix(".lease"))
        else {
            continue;
        };
        if !is_abandoned(&path) {
            continue;
        }
        if super::discard::remove_run_worktree(repo, run_id) {
            swept.push(run_id.to_string());
        }
    }
    release_abandoned(repo);
    swept.sort();
    swept
}

/// Hands back the slots whose run died holding them, as `pool::finish` would have (their branch
/// would stay checked out there, and could be neither resumed nor discarded).
fn release_abandoned(repo: &Repository) {
    for_each_unheld(repo, |k, _| {
        if !pool::path_of(repo, k).is_dir() {
            return;
        }
        let Ok(tree) = pool::open_slot(repo, k) else {
            pool::clear(repo, k);
            return;
        };
        let head = tree.head().ok().and_then(|h| h.target());
        if let (Ok(false), Some(commit)) = (tree.head_detached(), head) {
            let path = pool::path_of(repo, k);
            let emptied = pool::remove_leftovers(&tree, &path, pool::Look::Names).is_ok();
            if !emptied || tree.set_head_detached(commit).is_err() {
                pool::clear(repo, k);
            }
        }
    });
}

/// Calls `f` with each slot that exists and that no run holds, holding it meanwhile.
fn for_each_unheld(repo: &Repository, mut f: impl FnMut(usize, &Path)) {
    for k in 1..=pool::SIZE {
        let lock = pool::lock_of(repo, k);
        if !lock.is_file() {
            continue;
        }
        if let Ok(Some(_held)) = crate::leftovers::Lease::hold(&lock) {
            f(k, &lock);
        }
    }
}

/// Removes every pooled tree no run holds (`agent-git gc`), and says which.
pub fn empty_pool(repo: &Repository) -> Vec<PathBuf> {
    let mut emptied = Vec::new();
    for_each_unheld(repo, |k, lock| {
        let path = pool::path_of(repo, k);
        let existed = path.exists();
        pool::clear(repo, k);
        // Removed while held: a run that opened it meanwhile finds the lock gone and moves on.
        let _ = std::fs::remove_file(lock);
        if existed {
            emptied.push(path);
        }
    });
    emptied
}

/// Removes the cgroups that helpers of an agent-git now gone left behind, ending any
/// process still in them; says how many.
fn sweep_cgroups() -> usize {
    let mut found: Vec<(u32, u32)> = Vec::new();
    for (dir, prefix) in [
        ("/sys/fs/cgroup/pids/agent-git", ""),
        ("/sys/fs/cgroup", "agent-git-"),
    ] {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        found.extend(entries.flatten().filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (owner, helper) = name.strip_prefix(prefix)?.split_once('-')?;
            Some((owner.parse().ok()?, helper.parse().ok()?))
        }));
    }
    found.sort_unstable();
    found.dedup();
    let gone = found
        .into_iter()
        .filter(|(owner, _)| !Path::new(&format!("/proc/{owner}")).exists());
    gone.into_iter()
        .filter(|(owner, helper)| crate::sandbox::helper::remove_cgroup_of(*owner, *helper))
        .count()
}

/// The lasting rooms of `objects` in `temp` that no run holds, removed; their paths.
pub fn empty_rooms(temp: &Path, objects: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for k in 1..=rooms::SLOTS {
        let root = temp.join(rooms::name_of(objects, k));
        if !rooms::is_private_dir(&root) {
            continue;
        }
        if rooms::remove_held(temp, &root) {
            removed.push(root);
        }
    }
    removed
}

/// Removes this user's lasting rooms in `temp` whose repository is gone (their object
/// database no longer exists) and that no run holds.
pub fn sweep_orphans(temp: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let root = entry.path();
        let named = entry
            .file_name()
            .to_string_lossy()
            .starts_with(rooms::PREFIX);
        if !named || !rooms::is_private_dir(&root) {
            continue;
        }
        let alternates = root.join("git/objects/info/alternates");
        let objects = std::fs::read_to_string(&alternates).unwrap_or_default();
        let objects = objects.trim();
        if objects.is_empty() || Path::new(objects).is_dir() {
            continue;
        }
        if rooms::remove_held(temp, &root) {
            removed.push(root);
        }
    }
    removed.sort();
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leftovers::Lease;
    use rooms::{take, Taken};

    #[test]
    fn only_the_dirs_of_runs_that_are_gone_are_swept() {
        let temp = tempfile::tempdir().unwrap();
        let make = |name: &str| {
            let dir = temp.path().join(name);
            std::fs::create_dir_all(dir.join("home/work/work")).unwrap();
            dir
        };
        let live = make("agent-git-sandbox-live");
        let _held = Lease::take(&live.join(LEASE)).unwrap();
        let dead = make("agent-git-clean-dead");
        drop(Lease::take(&dead.join(LEASE)).unwrap());
        // An overlay leaves its work dir unreadable; the sweep still gets through.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            dead.join("home/work/work"),
            PermissionsExt::from_mode(0o000),
        )
        .unwrap();
        // A link in a leftover is removed, never followed: what it leads to keeps its mode.
        let victim = temp.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::fs::set_permissions(&victim, PermissionsExt::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(&victim, dead.join("home/link")).unwrap();
        let unleased = make("agent-git-sandbox-nolease");
        // Another user's look-alike, abandoned lease and all (where this test may make one).
        let foreign = make("agent-git-sandbox-foreign");
        drop(Lease::take(&foreign.join(LEASE)).unwrap());
        let root = rustix::process::geteuid().is_root();
        if root {
            let nobody = Some(rustix::process::Uid::from_raw(65534));
            rustix::fs::chown(&foreign, nobody, None).unwrap();
        }
        let other = make("someone-elses");
        std::fs::write(other.join(LEASE), "").unwrap();
        assert!(
            !is_abandoned(&live.join(LEASE)),
            "a held lease is not a leftover's"
        );
        let mut swept = vec![dead.clone()];
        if !root {
            swept.insert(0, foreign.clone());
        }
        assert_eq!(sweep_temp_dirs(temp.path()), swept);
        assert!(live.exists() && unleased.exists() && other.exists());
        assert_eq!(foreign.exists(), root);
        assert!(!dead.exists());
        let mode = std::fs::metadata(&victim).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755);
    }

    #[test]
    fn rooms_of_a_repository_that_is_gone_are_swept_and_held_ones_stay() {
        let temp = tempfile::tempdir().unwrap();
        let repo = tempfile::tempdir().unwrap();
        let objects = repo.path().join("objects");
        std::fs::create_dir(&objects).unwrap();
        let gone = Path::new("/nowhere/.git/objects");
        let with_alternates = |taken: &Taken, to: &Path| {
            let info = taken.root.join("git/objects/info");
            std::fs::create_dir_all(&info).unwrap();
            std::fs::write(info.join("alternates"), format!("{}\n", to.display())).unwrap();
        };
        let live = take(temp.path(), &objects).unwrap();
        with_alternates(&live, &objects);
        let orphan = take(temp.path(), gone).unwrap();
        with_alternates(&orphan, gone);
        let held_orphan = take(temp.path(), gone).unwrap();
        with_alternates(&held_orphan, gone);
        let (live_root, orphan_root) = (live.root.clone(), orphan.root.clone());
        drop((live, orphan));
        assert_eq!(sweep_orphans(temp.path()), vec![orphan_root]);
        assert!(live_root.is_dir() && held_orphan.root.is_dir());
        assert_eq!(empty_rooms(temp.path(), &objects), vec![live_root]);
    }
}
