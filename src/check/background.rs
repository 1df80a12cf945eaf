//! `fix` mode: an agent run on the failing commit, started in the background so that the push
//! never waits for a model. It runs detached, in a session of its own (a Ctrl-C or a closed
//! terminal after the push does not stop it), its output in a log file under the git dir.

use git2::{BranchType, Oid, Repository};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// A fix run that was started: its branch (not there until the run makes it) and its log.
#[derive(Debug, Clone)]
pub struct StartedFix {
    /// The failing commit the run starts from.
    pub commit: Oid,
    /// The branch the run is told to make.
    pub branch: String,
    /// The file under the git dir (`agent-git/logs`) the run's stdout and stderr go to.
    pub log: PathBuf,
}

/// Variables git sets for a hook that would point the run at the wrong place: it is given
/// its repository by path.
const GIT_LOCATION_VARS: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_PREFIX",
    "GIT_COMMON_DIR",
];

/// Starts `agent-git fix --base COMMIT --branch agent/prepush-SHORT` and returns at once.
/// `extra` are more options for `fix` (from `AGENT_GIT_HOOK_ARGS`).
pub fn start_fix(repo: &Repository, commit: Oid, extra: &[String]) -> Result<StartedFix, String> {
    let short = &commit.to_string()[..7];
    let branch = free_branch(repo, &format!("agent/prepush-{short}"))?;
    let logs = repo.commondir().join("agent-git").join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("cannot create {}: {e}", logs.display()))?;
    let log = logs.join(format!("{}.log", branch.replace('/', "-")));
    let out =
        std::fs::File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("cannot open {} twice: {e}", log.display()))?;
    let place = repo.workdir().unwrap_or(repo.path()).to_path_buf();
    let exe = std::env::current_exe().map_err(|e| format!("cannot find agent-git itself: {e}"))?;
    let task = format!("The tests fail at {short}, whose push was refused. Make them pass.");
    let mut cmd = Command::new(exe);
    let mut repo_arg = std::ffi::OsString::from("--repo=");
    repo_arg.push(&place);
    cmd.arg("fix")
        .arg(format!("--base={commit}"))
        .arg(format!("--branch={branch}"))
        .arg(repo_arg)
        .args(extra)
        // The task after `--`: whatever the hook's arguments were, it is not read as a flag.
        .arg("--")
        .arg(task)
        .current_dir(&place)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    for name in GIT_LOCATION_VARS {
        cmd.env_remove(name);
    }
    // agent-git took the keys out of its own environment when it started.
    for name in crate::secrets::API_KEYS {
        if let Some(value) = crate::secrets::var(name) {
            cmd.env(name, value);
        }
    }
    // SAFETY: the closure runs in the child between fork and exec and only calls setsid(2),
    // which is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
    cmd.spawn()
        .map_err(|e| format!("cannot start agent-git fix: {e}"))?;
    Ok(StartedFix {
        commit,
        branch,
        log,
    })
}

/// `name`, or `name-2`, `name-3`, ... : the first that is no branch yet.
fn free_branch(repo: &Repository, name: &str) -> Result<String, String> {
    (1..100)
        .map(|n| match n {
            1 => name.to_string(),
            n => format!("{name}-{n}"),
        })
        .find(|candidate| repo.find_branch(candidate, BranchType::Local).is_err())
        .ok_or_else(|| {
            format!("{name}-2 to {name}-99 exist already; delete old agent branches first")
        })
}
