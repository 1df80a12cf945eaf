//! `agent-git sandbox-exec` (hidden): the sandbox helper. agent-git runs it; people do not.

use crate::sandbox::helper::{self, HelperArgs, HomeOverlay, TreeOverlay};
use clap::Args;
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
pub struct SandboxExecArgs {
    /// A directory the command may write to (repeatable); nothing else is writable.
    #[arg(long = "write")]
    writable: Vec<PathBuf>,
    /// A path the command may not read (repeatable).
    #[arg(long = "hide")]
    hidden: Vec<PathBuf>,
    /// A path inside a hidden one that the command may read (repeatable).
    #[arg(long = "show")]
    shown: Vec<PathBuf>,
    /// A path inside a writable one that stays read-only (repeatable).
    #[arg(long = "read-only")]
    read_only: Vec<PathBuf>,
    /// A path the command must still see under a fresh mount (repeatable).
    #[arg(long = "keep")]
    keep: Vec<PathBuf>,
    /// HOME, shown read-only under an overlay whose writes land in --home-upper.
    #[arg(long, requires = "home_upper")]
    home: Option<PathBuf>,
    #[arg(long, requires = "home")]
    home_upper: Option<PathBuf>,
    /// A tree seen through an overlay whose writes land in --tree-upper, where one can be
    /// mounted.
    #[arg(long, requires = "tree_upper")]
    tree: Option<PathBuf>,
    #[arg(long, requires = "tree")]
    tree_upper: Option<PathBuf>,
    #[arg(long)]
    no_read_only_rest: bool,
    #[arg(long)]
    no_fresh_proc: bool,
    /// Seconds after which the command dies, whatever agent-git does.
    #[arg(long)]
    max_wall: Option<u64>,
    #[arg(long)]
    max_processes: u64,
    #[arg(long)]
    max_file_size: u64,
    #[arg(long)]
    max_cpu: u64,
    #[arg(long)]
    no_network_isolation: bool,
    #[arg(long)]
    no_landlock: bool,
    #[arg(long)]
    probe: bool,
    #[arg(last = true)]
    command: Vec<OsString>,
}

pub fn run(args: SandboxExecArgs) -> u8 {
    let code = helper::run(&HelperArgs {
        writable: args.writable,
        hidden: args.hidden,
        shown: args.shown,
        read_only: args.read_only,
        keep: args.keep,
        home: args
            .home
            .zip(args.home_upper)
            .map(|(home, upper)| HomeOverlay { home, upper }),
        tree: args
            .tree
            .zip(args.tree_upper)
            .map(|(tree, upper)| TreeOverlay { tree, upper }),
        read_only_rest: !args.no_read_only_rest,
        fresh_proc: !args.no_fresh_proc,
        max_wall: args.max_wall,
        max_processes: args.max_processes,
        max_file_size: args.max_file_size,
        max_cpu: args.max_cpu,
        network: !args.no_network_isolation,
        landlock: !args.no_landlock,
        probe: args.probe,
        command: args.command,
    });
    u8::try_from(code.clamp(0, 255)).unwrap_or(u8::MAX)
}
