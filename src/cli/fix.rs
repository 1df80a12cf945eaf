//! `agent-git fix`: settings and checks, then one run, then the report on stdout.

use super::CliError;
use crate::agent::SYSTEM_PROMPT;
use crate::attempts::{Assignment, SetRequest};
use crate::model::Model;
use crate::run::execute;
use crate::settings::SettingFlags;
use crate::start::FixRequest;
use crate::text::for_terminal;
use clap::Args;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

/// The task of a `fix` that is given none.
pub const DEFAULT_TASK: &str = "Make the failing tests pass.";

/// What `agent-git fix` takes: the task, where the run starts, its settings and budgets, and how it
/// reports.
#[derive(Debug, Clone, Args)]
pub struct FixArgs {
    /// What the agent should do.
    #[arg(default_value = DEFAULT_TASK)]
    pub task: String,
    /// Which repository (`--repo`); by default the one containing the current directory.
    #[command(flatten)]
    pub repo: super::RepoArg,
    /// The commit the run's branch starts from.
    #[arg(long, value_name = "REV", default_value = "HEAD")]
    pub base: String,
    /// The branch to create [default: agent/<slug of the task>-<run id>]; must not exist.
    #[arg(long, value_name = "NAME")]
    pub branch: Option<String>,
    /// Keep the run's work tree on its branch after the run, for you to look around in
    /// (`--json` names it): by default it goes back to the pool of work trees, emptied, for
    /// the next run. The branch stays either way.
    #[arg(long)]
    pub keep_worktree: bool,
    /// Print one JSON object on stdout instead of the report.
    #[arg(long)]
    pub json: bool,
    /// Print the run's steps on stdout as they happen, one JSON object a line: start, turn,
    /// tool_call, test_run, commit, and last end (the object --json prints), for tools that
    /// follow a run.
    #[arg(long, conflicts_with = "json")]
    pub json_events: bool,
    /// Write the whole conversation (system, tools, messages) as JSON to PATH.
    #[arg(long, value_name = "PATH")]
    pub transcript: Option<PathBuf>,
    /// Settings: from these flags, else the environment, git config or a committed
    /// `.agentgit`, else their defaults.
    #[command(flatten)]
    pub settings: SettingFlags,
    /// Save every API request and response of the run (never the key) to PATH, for
    /// `--model replay:PATH`.
    #[arg(long, value_name = "PATH")]
    pub record: Option<PathBuf>,
    /// Ask for whole replies instead of streamed ones. Streamed text is shown on stderr as it
    /// arrives; without streaming, Anthropic allows --max-tokens up to 21333.
    #[arg(long)]
    pub no_stream: bool,
    /// Start from your working tree as it is (tracked files and untracked ones not ignored)
    /// instead of HEAD: a commit of it on top of HEAD becomes the run's base. Your index,
    /// HEAD and files are not touched.
    #[arg(long)]
    pub dirty: bool,
    /// Do not run the repository's pre-commit and commit-msg hooks on agent commits (they
    /// run by default, in the sandbox, as `git commit` would run them).
    #[arg(long)]
    pub no_verify: bool,
    /// Go on with a run that stopped (a budget, a model error, stuck, interrupted), on its
    /// branch, with its stored conversation and a fresh budget; RUN is its branch or run id.
    #[arg(long, value_name = "RUN", conflicts_with_all = ["base", "branch", "dirty", "if_failing"])]
    pub resume: Option<String>,
    /// Let the model ask you questions (ask_user) at this terminal. Without it, or without a
    /// terminal, the model is told that nobody is available and decides itself.
    #[arg(long)]
    pub interactive: bool,
    /// Print the system prompt the model is given, and exit.
    #[arg(long)]
    pub print_system_prompt: bool,
    /// Confine commands and tests: no network, writes only in the work tree, limits on
    /// processes, file size and CPU; tests cannot read your checkout or the model's files.
    /// `off` runs them unconfined (the report says so); only this flag can turn it off, never
    /// a config file.
    #[arg(long, value_enum, default_value_t = SandboxFlag::On)]
    pub sandbox: SandboxFlag,
    /// Stop before the model is called when the tests already pass at the base, and keep no
    /// branch (outcome already-passing, exit 0). For hooks and CI jobs.
    #[arg(long)]
    pub if_failing: bool,
    /// After a passed run, leave each change (a hunk, or a file change whole) out alone and
    /// test again, to tell the changes the tests require from those they do not; by default
    /// only when there are at most 8 and a test run takes at most 30 s.
    #[arg(long, overrides_with = "no_prove_hunks")]
    pub prove_hunks: bool,
    /// Never prove the changes of a passed run.
    #[arg(long, overrides_with = "prove_hunks")]
    pub no_prove_hunks: bool,
    /// Make N independent attempts from the same base, each an ordinary run with its own
    /// branch, work tree and sandbox, and choose one: passed beats not passed, then fewer
    /// failing tests, then the smaller diff, then the lower cost. --max-cost and --max-time
    /// hold for the whole set (each attempt starts with an even share of the cost left). With
    /// --model script:DIR, each attempt reads its own file of DIR, in name order.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub attempts: u32,
    /// How many attempts run at once.
    #[arg(long, value_name = "J", default_value_t = 1, requires = "attempts", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub jobs: u32,
    /// Say more of what the run sets up: the sandbox's layers in full.
    #[arg(short, long)]
    pub verbose: bool,
    /// Internal: the attempt of a set this process is (set by `--attempts`).
    #[arg(long, value_name = "JSON", hide = true)]
    pub attempt_of: Option<String>,
}

/// `--sandbox`: `on` (the default) confines the model's commands and the tests, `off` runs them
/// unconfined.
// No doc on the variants: clap would show each one as its value's help (in --help, the man
// page and the completions), and the enum's doc says all.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SandboxFlag {
    On,
    Off,
}

impl FixArgs {
    /// What the user asked, for the library.
    pub fn request(&self) -> FixRequest {
        FixRequest {
            task: self.task.clone(),
            repo: self.repo.path.clone(),
            base: self.base.clone(),
            branch: self.branch.clone(),
            flags: self.settings.0.clone(),
            keep_worktree: self.keep_worktree,
            transcript: self.transcript.clone(),
            record: self.record.clone(),
            no_stream: self.no_stream,
            dirty: self.dirty,
            no_verify: self.no_verify,
            resume: self.resume.clone(),
            interactive: self.interactive,
            sandbox: match self.sandbox {
                SandboxFlag::On => crate::sandbox::Mode::On,
                SandboxFlag::Off => crate::sandbox::Mode::Off,
            },
            if_failing: self.if_failing,
            prove_hunks: match (self.prove_hunks, self.no_prove_hunks) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            },
            attempt: None,
            verbose: self.verbose,
        }
    }

    /// What the user asked of a set of attempts, or why it cannot be asked.
    fn set_request(&self) -> Result<SetRequest, CliError> {
        let alone = [
            (self.resume.is_some(), "--resume"),
            (self.interactive, "--interactive"),
            (self.transcript.is_some(), "--transcript"),
            (self.record.is_some(), "--record"),
            (self.if_failing, "--if-failing"),
            (self.json_events, "--json-events"),
        ];
        if let Some((_, flag)) = alone.iter().find(|(given, _)| *given) {
            return Err(CliError::Usage(format!(
                "{flag} goes with one run, not with --attempts; each attempt's conversation is \
                 stored with its report (`agent-git transcript RUN`)"
            )));
        }
        let mut args = std::env::args_os().skip(1);
        if args.next().as_deref() != Some(std::ffi::OsStr::new("fix")) {
            return Err(CliError::Usage(
                "--attempts is taken by `agent-git fix` only".into(),
            ));
        }
        let exe = std::env::current_exe()
            .map_err(|e| CliError::Harness(format!("cannot find the agent-git binary: {e}")))?;
        Ok(SetRequest {
            attempts: self.attempts,
            jobs: self.jobs,
            repo: self.repo.path.clone(),
            base: self.base.clone(),
            dirty: self.dirty,
            branch: self.branch.clone(),
            flags: self.settings.0.clone(),
            args: args.collect(),
            exe,
        })
    }
}

/// Runs `agent-git fix` with the configured model; the exit code is one `fix --help` lists.
pub fn run(args: FixArgs) -> Result<u8, CliError> {
    fix_with(args, None)
}

/// The whole command; `model` replaces the configured one (the demo's built-in script).
pub fn fix_with(args: FixArgs, model: Option<Box<dyn Model>>) -> Result<u8, CliError> {
    if args.print_system_prompt {
        print!("{SYSTEM_PROMPT}");
        if let Some(instructions) =
            crate::start::instructions_at(args.repo.path.as_deref(), &args.base)
        {
            print!(
                "\n[The first message of a run in this repository also holds:]\n\n{}\n",
                instructions.section()
            );
        }
        return Ok(0);
    }
    if args.attempt_of.is_none() && args.attempts > 1 && model.is_none() {
        return fix_set(&args);
    }
    let mut request = args.request();
    let mut json = args.json;
    if let Some(text) = &args.attempt_of {
        // One attempt of a set: what the set decided replaces what the arguments say.
        let assignment = Assignment::parse(text).map_err(CliError::Usage)?;
        // Should the set's process go (killed, its terminal gone), the attempt is told to stop
        // as by Ctrl-C, and still writes its report.
        let _ =
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::INT));
        assignment.apply_to(&mut request.flags);
        request.base = assignment.base.clone();
        request.branch = assignment.branch.clone();
        request.dirty = false;
        request.no_stream = true;
        request.attempt = Some(assignment.of);
        json = true;
    }
    let mut plan = crate::start::plan_fix(request, model)?;
    let events = args.json_events && args.attempt_of.is_none();
    if events {
        plan.events = Some(Box::new(print_event));
    }
    let tty = std::io::stderr().is_terminal();
    // On a terminal the line that counts a test run's seconds is rewritten in place.
    let clear = if tty { "\r\x1b[2K" } else { "" };
    // What is shown of the model's words and the repository's names drives no terminal.
    // Written, not printed: stderr may be a pipe to a set that is gone, which must not stop
    // the run before its report.
    let mut progress = |line: &str| {
        let _ = writeln!(
            std::io::stderr(),
            "{clear}agent-git: {}",
            for_terminal(line)
        );
    };
    let shown = std::cell::Cell::new(Duration::ZERO);
    let waiting = |label: &str, elapsed: Duration| {
        if let Some(line) = waiting_line(label, elapsed, &shown, tty) {
            let _ = write!(std::io::stderr(), "{line}");
        }
    };
    let finished = execute(plan, &mut progress, &waiting)?;
    if events {
        let mut end = finished.json.clone();
        end["type"] = serde_json::json!("end");
        print_event(&end);
    } else if json {
        println!("{}", finished.json);
    } else {
        print!("{}", for_terminal(&finished.message));
    }
    Ok(finished.outcome.exit_code())
}

/// One event, a line of JSON on stdout, out at once for whoever follows the run.
fn print_event(event: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{event}").and_then(|()| out.flush());
}

/// `fix --attempts N`: the set, its summary on stdout (or `--json`), the chosen attempt's
/// exit code.
fn fix_set(args: &FixArgs) -> Result<u8, CliError> {
    let request = args.set_request()?;
    let interrupt = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let _watch = super::watch_interrupt(
        interrupt.clone(),
        "agent-git: interrupted; the attempts are writing their reports (again to quit now)",
    )?;
    let progress = |line: &str| eprintln!("agent-git: {}", for_terminal(line));
    let outcome = crate::attempts::run_set(&request, &interrupt, &progress)?;
    if args.json {
        println!("{}", outcome.summary.json());
    } else {
        print!("{}", for_terminal(&outcome.summary.message()));
    }
    Ok(outcome.exit_code)
}

/// The line to show while tests run, if one is due: on a terminal one line rewritten every
/// second, elsewhere a line every 10 s. `shown` is when the last one was shown.
fn waiting_line(
    label: &str,
    elapsed: Duration,
    shown: &std::cell::Cell<Duration>,
    tty: bool,
) -> Option<String> {
    let every = Duration::from_secs(if tty { 1 } else { 10 });
    if elapsed < shown.get() {
        shown.set(Duration::ZERO); // a new test run
    }
    if elapsed < shown.get() + every {
        return None;
    }
    shown.set(elapsed - Duration::from_nanos(elapsed.subsec_nanos().into()));
    let secs = elapsed.as_secs();
    Some(if tty {
        format!("\r\x1b[2Kagent-git: tests running ({label}): {secs} s")
    } else {
        format!("agent-git: tests still running ({label}): {secs} s\n")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_test_is_shown_every_second_on_a_terminal_and_every_ten_elsewhere() {
        let secs = |s: f64| Duration::from_secs_f64(s);
        let shown = std::cell::Cell::new(Duration::ZERO);
        let log: Vec<Option<String>> = [0.02, 9.9, 10.05, 15.0, 20.3]
            .iter()
            .map(|s| waiting_line("npm test", secs(*s), &shown, false))
            .collect();
        assert_eq!(
            log,
            vec![
                None,
                None,
                Some("agent-git: tests still running (npm test): 10 s\n".into()),
                None,
                Some("agent-git: tests still running (npm test): 20 s\n".into()),
            ]
        );
        // A new test run starts the count again.
        assert_eq!(waiting_line("npm test", secs(0.1), &shown, false), None);
        let tty = std::cell::Cell::new(Duration::ZERO);
        assert_eq!(waiting_line("x", secs(0.5), &tty, true), None);
        assert_eq!(
            waiting_line("x", secs(1.2), &tty, true),
            Some("\r\x1b[2Kagent-git: tests running (x): 1 s".into())
        );
        assert_eq!(waiting_line("x", secs(1.9), &tty, true), None);
        assert!(waiting_line("x", secs(2.0), &tty, true).is_some());
    }
}
