//! `agent-git man`: the manual page (roff) from the parser's own definitions; with --dir, one
//! page per subcommand beside it.

use super::CliError;
use clap::{Args, CommandFactory};

/// What `agent-git man` takes: where to write the pages, if not to stdout.
#[derive(Debug, Clone, Args)]
pub struct ManArgs {
    /// Write the pages into DIR instead: `agent-git.1` and one for each subcommand
    /// (`agent-git-fix.1`, `agent-git-eval-report.1`, ...); DIR is created if it is missing.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}

/// Prints the manual page (roff) on stdout, or with `--dir` writes it and one page per subcommand
/// there. Exit code 0.
pub fn run(args: ManArgs) -> Result<u8, CliError> {
    let Some(dir) = args.dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(paged_command())
            .render(&mut page)
            .map_err(|e| CliError::Harness(format!("cannot render the man page: {e}")))?;
        print!("{}", String::from_utf8_lossy(&page));
        return Ok(0);
    };
    let cannot = |e: std::io::Error| {
        CliError::Usage(format!(
            "cannot write the man pages to {}: {e}",
            dir.display()
        ))
    };
    std::fs::create_dir_all(&dir).map_err(cannot)?;
    clap_mangen::generate_to(paged_command(), &dir).map_err(cannot)?;
    println!(
        "agent-git: wrote the man pages to {} (agent-git.1 and one per subcommand)",
        dir.display()
    );
    Ok(0)
}

/// The command line as the pages show it: without `help`, which has no page of its own (the
/// top page names each subcommand's page, and --dir writes exactly those).
fn paged_command() -> clap::Command {
    super::Cli::command().disable_help_subcommand(true)
}
