use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = agent_git::cli::Cli::parse();
    match agent_git::cli::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!(
                "agent-git: {}",
                agent_git::text::for_terminal(&e.to_string())
            );
            ExitCode::from(e.exit_code())
        }
    }
}
