//! `agent-git eval`: run a task suite, `eval report`: tables of result lines, `eval import`:
//! a task from a fix commit. Glue over `crate::eval`.

use super::CliError;
use crate::eval::html::{page, Configuration};
use crate::eval::import::{import, ImportRequest};
use crate::eval::report::{compare, table};
use crate::eval::results::{read_all, read_existing, RunRecord};
use crate::eval::runner::{jobs, run_all, EvalPlan, Shard};
use crate::eval::swebench::{import_instance, SweBenchRequest};
use crate::eval::task::discover;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const EVAL_HELP: &str = "\
Exit codes:
  0    every run started was recorded, whatever its outcome (the table tells)
  2    usage error, a task that cannot be used, or a refused import (nothing written)
  4    the harness failed
  130  interrupted (Ctrl-C): finished runs are kept; rerun with the same --out to go on";

/// What `agent-git eval` takes: `report` or `import`, or else the suite to run.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, after_help = EVAL_HELP)]
pub struct EvalArgs {
    /// `report` or `import`; None runs the suite `run` describes.
    #[command(subcommand)]
    pub command: Option<EvalCommand>,
    /// The suite to run, when no subcommand is given.
    #[command(flatten)]
    pub run: RunArgs,
}

/// `agent-git eval`'s subcommands.
#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Print the table of result files (shards are merged); --vs compares with other files;
    /// --html also writes a self-contained page with charts.
    Report(ReportArgs),
    /// Make a task from a fix commit (its parent plus its test files, its other changes as
    /// the oracle) or a SWE-bench instance. Refused unless the tests fail before and pass
    /// with the fix.
    Import(ImportArgs),
}

/// What a suite run takes: the tasks, the model, how many runs at a time and of what, and the
/// results file.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Task directories, or directories of them.
    #[arg(value_name = "DIR", default_value = "evals")]
    pub dirs: Vec<PathBuf>,
    /// The model of every run (as fix --model), or `oracle`: each task's oracle.json.
    #[arg(long, value_name = "SPEC")]
    pub model: Option<String>,
    /// Runs of each task.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Runs at a time.
    #[arg(long, value_name = "J", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: u32,
    /// Make each run best-of-N (`fix --attempts N`, one attempt at a time): the table then
    /// gives the best-of-N rate beside pass@1 of one attempt. With --model oracle, a task's
    /// `attempts/` directory gives each attempt its own script.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub attempts: u32,
    /// Only the I-th of N shards: the (task, run) pairs whose position in the sorted list is
    /// I-1 modulo N.
    #[arg(long, value_name = "I/N", value_parser = Shard::parse)]
    pub shard: Option<Shard>,
    /// The results file; one JSON line per run is appended, and runs already in it are skipped.
    #[arg(long, value_name = "PATH", default_value = "results.jsonl")]
    pub out: PathBuf,
    /// Only tasks with this tag.
    #[arg(long, value_name = "TAG")]
    pub tag: Option<String>,
}

/// What `agent-git eval report` takes: the result files, what to compare them with, and where to
/// write the HTML page.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result files (JSON lines), e.g. the shards of one eval.
    #[arg(value_name = "RESULTS", required = true)]
    pub files: Vec<PathBuf>,
    /// Result files of another configuration to compare with, task by task.
    #[arg(long, value_name = "RESULTS", num_args = 1..)]
    pub vs: Vec<PathBuf>,
    /// Also write one self-contained HTML page: the tables and charts of pass rate per task,
    /// cost per solved task and turns per run (side by side with --vs).
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,
}

/// What `agent-git eval import` takes: the fix commit or SWE-bench instance, and the task directory
/// to write.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The repository holding the fix commit.
    #[arg(long, value_name = "PATH")]
    pub repo: PathBuf,
    /// The fix commit.
    #[arg(long, value_name = "COMMIT", required_unless_present = "swe_bench")]
    pub fix: Option<String>,
    /// A SWE-bench-format instance (JSON) instead of a fix commit: the base is its
    /// base_commit plus its test_patch, the oracle its patch, and FAIL_TO_PASS and
    /// PASS_TO_PASS the task's required tests.
    #[arg(long, value_name = "INSTANCE.json", conflicts_with_all = ["fix", "tests"])]
    pub swe_bench: Option<PathBuf>,
    /// Glob of the fix's test files (repeatable) [default: test_*.py, *_test.py, *_test.go,
    /// tests/**, test/**, *.test.js, ...].
    #[arg(long, value_name = "GLOB")]
    pub tests: Vec<String>,
    /// The test command [default: detected as fix does].
    #[arg(long, value_name = "CMD")]
    pub test_cmd: Option<String>,
    /// The task directory to write; must not exist or be empty.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Runs the suite, or the report or import asked for; the exit code is one `eval --help` lists (130
/// when a suite run was interrupted).
pub fn run(args: EvalArgs) -> Result<u8, CliError> {
    match args.command {
        Some(EvalCommand::Report(report)) => run_report(report),
        Some(EvalCommand::Import(import)) => run_import(import),
        None => run_suite(args.run),
    }
}

fn eval_error(e: crate::eval::EvalError) -> CliError {
    CliError::Usage(e.to_string())
}

fn run_report(args: ReportArgs) -> Result<u8, CliError> {
    let records = read_all(&args.files).map_err(eval_error)?;
    print!("{}", crate::text::for_terminal(&table(&records)));
    let other = if args.vs.is_empty() {
        None
    } else {
        let other = read_all(&args.vs).map_err(eval_error)?;
        println!();
        print!("{}", crate::text::for_terminal(&compare(&records, &other)));
        Some(other)
    };
    if let Some(path) = &args.html {
        let config = |records, files: &[PathBuf]| Configuration {
            records,
            files: files.iter().map(|f| f.display().to_string()).collect(),
        };
        let vs = other.as_deref().map(|o| config(o, &args.vs));
        let made = std::time::SystemTime::now();
        let html = page(&config(&records, &args.files), vs.as_ref(), made).map_err(eval_error)?;
        std::fs::write(path, html)
            .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
    }
    Ok(0)
}

fn run_import(args: ImportArgs) -> Result<u8, CliError> {
    let progress = &mut |line: &str| eprintln!("agent-git: {}", crate::text::for_terminal(line));
    let Some(fix) = args.fix else {
        let request = SweBenchRequest {
            instance: args.swe_bench.unwrap_or_default(),
            repo: args.repo,
            test_cmd: args.test_cmd,
            out: args.out,
        };
        let id = import_instance(&request, progress).map_err(eval_error)?;
        println!("task written to {}: {id}", request.out.display());
        return Ok(0);
    };
    let request = ImportRequest {
        repo: args.repo,
        fix,
        tests: args.tests,
        test_cmd: args.test_cmd,
        out: args.out,
    };
    let subject = import(&request, progress).map_err(eval_error)?;
    println!("task written to {}: {subject}", request.out.display());
    Ok(0)
}

fn run_suite(args: RunArgs) -> Result<u8, CliError> {
    let usage = CliError::Usage;
    let model = args.model.clone().ok_or_else(|| {
        usage("eval needs --model SPEC (as fix --model), or --model oracle".into())
    })?;
    let tasks = discover(&args.dirs, args.tag.as_deref()).map_err(eval_error)?;
    if tasks.is_empty() {
        return Err(usage(
            "no tasks found (a task is a directory with task.json)".into(),
        ));
    }
    let exe = std::env::current_exe().map_err(|e| CliError::Harness(e.to_string()))?;
    let mut plan = EvalPlan {
        jobs: jobs(tasks.len(), args.runs, args.shard),
        tasks,
        model,
        parallel: args.jobs as usize,
        out: args.out.clone(),
        exe,
        attempts: args.attempts,
    };
    for task in &plan.tasks {
        plan.model_for(task).map_err(eval_error)?; // a missing oracle is a usage error
    }
    let earlier = read_existing(&args.out).map_err(eval_error)?;
    plan.skip_done(&earlier);
    let interrupt = Arc::new(AtomicBool::new(false));
    let _watch = super::watch_interrupt(
        interrupt.clone(),
        "agent-git eval: interrupted; stopping the running runs (again to quit now)",
    )?;
    let bar = progress_bar(plan.jobs.len() as u64);
    let show = |r: &RunRecord| {
        let mut line = format!(
            "{} run {}: {} ({:.1} s)",
            r.task, r.run, r.outcome, r.wall_secs
        );
        if let Some(attempts) = &r.attempts {
            line.push_str(&match attempts.chosen {
                Some(k) => format!(
                    "; attempt {k} of {} chosen, {} solved alone",
                    attempts.n, attempts.solved
                ),
                None => format!("; none of {} attempts ended with a report", attempts.n),
            });
        }
        if let Some(required) = &r.required_tests {
            line.push_str(&format!("; required tests {}", required.word()));
        }
        if bar.is_hidden() {
            eprintln!("agent-git eval: {}", crate::text::for_terminal(&line));
        } else {
            bar.println(line);
        }
        bar.inc(1);
    };
    run_all(&plan, &interrupt, &show).map_err(|e| CliError::Harness(e.to_string()))?;
    bar.finish_and_clear();
    let names: Vec<&str> = plan.tasks.iter().map(|t| t.name.as_str()).collect();
    let all = read_existing(&args.out).map_err(eval_error)?;
    let mine: Vec<RunRecord> = all
        .into_iter()
        .filter(|r| r.model == plan.model && names.contains(&r.task.as_str()))
        .filter(|r| r.attempts.as_ref().map_or(1, |a| a.n) == plan.attempts)
        .collect();
    print!("{}", crate::text::for_terminal(&table(&mine)));
    Ok(if interrupt.load(Ordering::SeqCst) {
        130
    } else {
        0
    })
}

/// A bar on a terminal; elsewhere hidden, and each run is a plain line.
fn progress_bar(total: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
    }
    let bar = ProgressBar::new(total);
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {pos}/{len} runs, {elapsed} ({eta} left)")
    {
        bar.set_style(style);
    }
    bar
}
