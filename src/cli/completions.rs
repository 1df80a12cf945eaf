//! `agent-git completions SHELL`: the shell's completion script, from the parser's own
//! definitions, so it offers exactly the subcommands and flags that `--help` lists.

use super::CliError;
use clap::{Args, CommandFactory, ValueEnum};

/// What `agent-git completions` takes: the shell.
#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: CompletionShell,
}

/// The shells whose scripts are tested (tests/completions.rs) and whose install lines the
/// README gives.
// No doc on the variants: clap would show each one as its value's help (in --help, the man
// page and the completions), and the names say all.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

impl CompletionShell {
    fn generator(self) -> clap_complete::Shell {
        match self {
            CompletionShell::Bash => clap_complete::Shell::Bash,
            CompletionShell::Zsh => clap_complete::Shell::Zsh,
            CompletionShell::Fish => clap_complete::Shell::Fish,
        }
    }
}

/// Prints the shell's completion script for the subcommands a user sees (not the hidden ones) on
/// stdout. Exit code 0.
pub fn run(args: CompletionsArgs) -> Result<u8, CliError> {
    let mut script = Vec::new();
    clap_complete::generate(
        args.shell.generator(),
        &mut visible_command(),
        "agent-git",
        &mut script,
    );
    let mut script = String::from_utf8_lossy(&script).into_owned();
    if let CompletionShell::Bash = args.shell {
        script = script.replace(BASH_MISSPELT_STATE, BASH_STATE);
    }
    print!("{script}");
    Ok(0)
}

/// The command line as a user sees it: clap's generators would also offer the hidden
/// subcommands (the sandbox helper and the like), which only agent-git itself runs.
fn visible_command() -> clap::Command {
    let full = super::Cli::command();
    let visible: Vec<clap::Command> = full
        .get_subcommands()
        .filter(|command| !command.is_hide_set())
        .cloned()
        .collect();
    clap::Command::new("agent-git")
        .version(env!("CARGO_PKG_VERSION"))
        .args(full.get_arguments().cloned())
        .subcommand_required(true)
        .subcommands(visible)
}

// clap_complete's bash script (clap-rs/clap#6421) names a subcommand's state
// `agent__git__subcmd__fix` where it is set and `agent__subcmd__git__subcmd__fix` where it is
// read, for any hyphen in the binary's name: no subcommand's flags would ever complete. A
// fixed clap_complete writes no misspelt state, and the replacement then does nothing.
const BASH_MISSPELT_STATE: &str = "agent__subcmd__git__subcmd__";
const BASH_STATE: &str = "agent__git__subcmd__";
