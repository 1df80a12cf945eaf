//! `agent-git sandbox-exec` (hidden): the sandbox helper. agent-git runs it; people do not.

use crate::sandbox::helper::{self, Policy};
use clap::Args;
use std::ffi::OsString;
use std::path::PathBuf;

/// What the hidden `sandbox-exec` command takes: the policy file, whether only to probe, and the
/// command after `--`.
#[derive(Debug, Clone, Args)]
pub struct SandboxExecArgs {
    /// The policy to enforce, as `sandbox::policy` built it (JSON); the file is removed once
    /// read.
    #[arg(long, value_name = "FILE")]
    policy_file: PathBuf,
    /// Say which layers hold, and run nothing.
    #[arg(long)]
    probe: bool,
    #[arg(last = true)]
    command: Vec<OsString>,
}

/// Confines this process as the policy says and runs the command (with `--probe`, reports
/// which layers hold instead); the exit code is `helper::run`'s, the command's own status, or
/// `helper::SANDBOX_FAILED` (125) when the policy cannot be read.
pub fn run(args: SandboxExecArgs) -> u8 {
    let read = std::fs::read(&args.policy_file);
    let _ = std::fs::remove_file(&args.policy_file);
    let policy = read
        .map_err(|e| e.to_string())
        .and_then(|json| serde_json::from_slice::<Policy>(&json).map_err(|e| e.to_string()));
    let code = match policy {
        Ok(policy) => helper::run(&Policy {
            probe: args.probe,
            command: args.command,
            ..policy
        }),
        Err(e) => {
            eprintln!(
                "agent-git sandbox: cannot read the policy {}: {e}; the command was not run",
                args.policy_file.display()
            );
            helper::SANDBOX_FAILED
        }
    };
    u8::try_from(code.clamp(0, 255)).unwrap_or(u8::MAX)
}
