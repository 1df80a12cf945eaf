//! The repository's commit hooks, run for agent commits as `git commit` runs them, but in the
//! sandbox like the model's own commands: they are the repository's code.

use crate::sandbox::Sandbox;
use crate::workspace::{CommitHooks, Workspace, WorkspaceError};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The longest one hook may take.
const HOOK_TIMEOUT: Duration = Duration::from_secs(120);

pub struct SandboxHooks<'a> {
    pub workspace: &'a Workspace,
    pub sandbox: &'a Sandbox,
    pub interrupt: &'a AtomicBool,
}

impl SandboxHooks<'_> {
    /// Runs `hook` with `args` in the model's jail; None when it passed or could not run
    /// (no such hook, or no sandbox to run it in), else what it printed.
    fn run(&self, hook: &str, args: &[&Path]) -> Result<Option<String>, WorkspaceError> {
        let Some(path) = self.workspace.hook_path(hook) else {
            return Ok(None);
        };
        let sandbox = self.sandbox;
        if sandbox.refusal().is_some() {
            return Ok(None);
        }
        let mut shell = quote(&path);
        for arg in args {
            shell.push(' ');
            shell.push_str(&quote(arg));
        }
        let raw = sandbox
            .run(
                &sandbox.model_jail(),
                &shell,
                HOOK_TIMEOUT,
                self.interrupt,
                &mut |_| {},
            )
            .map_err(|e| WorkspaceError::io("run the hook", &path, e))?;
        if raw.exit_code == Some(0) {
            return Ok(None);
        }
        let status = match (raw.exit_code, raw.timed_out) {
            (_, true) => format!("was killed after {} s", HOOK_TIMEOUT.as_secs()),
            (Some(code), _) => format!("exited with {code}"),
            (None, _) => "was killed by a signal".to_string(),
        };
        let output = raw.output.trim();
        Ok(Some(format!(
            "the repository's {hook} hook {status}:\n{output}"
        )))
    }
}

impl CommitHooks for SandboxHooks<'_> {
    fn runs_pre_commit(&self) -> bool {
        self.sandbox.refusal().is_none() && self.workspace.hook_path("pre-commit").is_some()
    }

    fn pre_commit(&self) -> Result<Option<String>, WorkspaceError> {
        self.run("pre-commit", &[])
    }

    /// The message goes to the hook in a file of the model's temp dir, where it may edit it.
    fn commit_msg(&self, message: &str) -> Result<Result<String, String>, WorkspaceError> {
        if self.workspace.hook_path("commit-msg").is_none() {
            return Ok(Ok(message.to_string()));
        }
        let dir = self.sandbox.private_dir().join("tmp");
        let io = |e| WorkspaceError::io("write the commit message for the hook", &dir, e);
        let file = tempfile::Builder::new()
            .prefix("COMMIT_EDITMSG.")
            .tempfile_in(&dir)
            .map_err(io)?;
        std::fs::write(file.path(), message).map_err(io)?;
        if let Some(output) = self.run("commit-msg", &[file.path()])? {
            return Ok(Err(output));
        }
        let edited = crate::files::read_regular(file.path(), 1 << 20).map_err(io)?;
        Ok(Ok(String::from_utf8_lossy(&edited).into_owned()))
    }
}

/// A word for `sh -c`, whatever it holds.
fn quote(path: &Path) -> String {
    format!("'{}'", path.to_string_lossy().replace('\'', r"'\''"))
}
