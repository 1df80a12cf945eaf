//! Runs every (task, run index) as an ordinary `agent-git fix --json` in a fresh repository,
//! J at a time, and appends one result line per finished run.

use super::results::{append, RequiredCheck, RunId, RunRecord};
use super::task::{materialize, Task};
use super::EvalError;
use crate::children::{self, Ended};
use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// `--shard I/N`: the I-th of N shards, I from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// I, from 1 to `count`.
    pub index: u32,
    /// N, at least 1.
    pub count: u32,
}

impl Shard {
    /// Reads `I/N`; errs unless 1 <= I <= N.
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("--shard takes I/N with 1 <= I <= N, e.g. 2/4; not {text:?}");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let (index, count) = (i.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
        if index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

/// One run to do: the task's index in the sorted task list, and the run index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    /// Index into the plan's `tasks`.
    pub task: usize,
    /// From 0 to the runs per task.
    pub run: u32,
}

/// Every (task, run) in sorted order; with a shard, those whose position is I-1 mod N.
pub fn jobs(task_count: usize, runs: u32, shard: Option<Shard>) -> Vec<Job> {
    (0..task_count)
        .flat_map(|task| (0..runs).map(move |run| Job { task, run }))
        .enumerate()
        .filter(|(i, _)| {
            shard.is_none_or(|s| *i as u64 % u64::from(s.count) == u64::from(s.index - 1))
        })
        .map(|(_, job)| job)
        .collect()
}

/// What an eval runs.
pub struct EvalPlan {
    /// Every task of the suite, sorted by name; jobs index into it.
    pub tasks: Vec<Task>,
    /// The model spec as given; `oracle` means each task's oracle.json.
    pub model: String,
    /// The runs to do, in order.
    pub jobs: Vec<Job>,
    /// How many runs go at once; 0 is taken as 1.
    pub parallel: usize,
    /// The results file each finished run is appended to.
    pub out: PathBuf,
    /// The agent-git binary each run spawns.
    pub exe: PathBuf,
    /// Attempts per run (`fix --attempts`): 1 is an ordinary run.
    pub attempts: u32,
}

impl EvalPlan {
    /// The jobs whose (task, run, model) is not in `done`.
    pub fn skip_done(&mut self, done: &[RunRecord]) {
        let done: HashSet<_> = done.iter().map(RunRecord::key).collect();
        let tasks = &self.tasks;
        let model = &self.model;
        let attempts = self.attempts;
        self.jobs.retain(|j| {
            !done.contains(&(tasks[j.task].name.clone(), j.run, model.clone(), attempts))
        });
    }

    /// The `--model` of a task's runs. With `oracle` and attempts, a task's `attempts/`
    /// directory (one script per attempt) where it has one.
    pub fn model_for(&self, task: &Task) -> Result<String, EvalError> {
        if self.model != "oracle" {
            return Ok(self.model.clone());
        }
        let scripts = task.dir.join("attempts");
        if self.attempts > 1 && scripts.is_dir() {
            return Ok(format!("script:{}", scripts.display()));
        }
        let oracle = task.oracle();
        if !oracle.is_file() {
            return Err(EvalError::Task(format!(
                "task {} has no oracle.json, which --model oracle needs",
                task.name
            )));
        }
        Ok(format!("script:{}", oracle.display()))
    }
}

/// Runs the plan's jobs, `parallel` at a time; `finished` is told of each recorded run. When
/// `interrupt` is set, no new run starts and the running ones are interrupted (not recorded).
pub fn run_all(
    plan: &EvalPlan,
    interrupt: &AtomicBool,
    finished: &(dyn Fn(&RunRecord) + Sync),
) -> Result<Vec<RunRecord>, EvalError> {
    for task in &plan.tasks {
        plan.model_for(task)?;
    }
    let queue = Mutex::new(plan.jobs.iter().copied().collect::<VecDeque<Job>>());
    let records = Mutex::new(Vec::new());
    let first_error = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..plan.parallel.max(1) {
            scope.spawn(|| loop {
                if interrupt.load(Ordering::SeqCst) {
                    break;
                }
                let Some(job) = queue.lock().ok().and_then(|mut q| q.pop_front()) else {
                    break;
                };
                match run_one(plan, job, interrupt) {
                    Ok(Some(record)) => {
                        let mut all = records.lock().unwrap_or_else(|e| e.into_inner());
                        if let Err(e) = append(&plan.out, &record) {
                            first_error
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .get_or_insert(e);
                        }
                        finished(&record);
                        all.push(record);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        first_error
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(e);
                    }
                }
            });
        }
    });
    if let Some(e) = first_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    Ok(records.into_inner().unwrap_or_else(|e| e.into_inner()))
}

/// One run in a fresh temp dir; None when it was interrupted.
fn run_one(
    plan: &EvalPlan,
    job: Job,
    interrupt: &AtomicBool,
) -> Result<Option<RunRecord>, EvalError> {
    let task = &plan.tasks[job.task];
    let dir = tempfile::Builder::new()
        .prefix(&format!("agent-git-eval-{}-{}-", task.name, job.run))
        .tempdir()
        .map_err(|e| EvalError::io(&std::env::temp_dir(), e))?;
    let repo = dir.path().join("repo");
    materialize(task, &repo)?;
    let home = dir.path().join("home");
    std::fs::create_dir(&home).map_err(|e| EvalError::io(&home, e))?;
    let mut cmd = fix_command(plan, task, job.run, dir.path())?;
    let started = Instant::now();
    let ended = wait_for(&mut cmd, dir.path(), task.spec.timeout_secs, interrupt)?;
    let wall = started.elapsed().as_secs_f64();
    if ended == Ended::Interrupted {
        return Ok(None);
    }
    let id = RunId {
        task: &task.name,
        run: job.run,
        model: &plan.model,
        impossible: task.spec.impossible,
    };
    let stdout = std::fs::read_to_string(dir.path().join("fix.json")).unwrap_or_default();
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_default();
    let mut record = match plan.attempts > 1 {
        true => RunRecord::from_set_json(&json, id, wall),
        false => RunRecord::from_fix_json(&json, id, wall),
    };
    let json = match plan.attempts > 1 {
        true => super::results::chosen_report(&json),
        false => json,
    };
    if let Some(required) = &task.spec.required_tests {
        record.required_tests = Some(RequiredCheck::of(required, &json["tests"]));
    }
    if ended == Ended::TimedOut {
        record.outcome = "eval-timeout".into();
        record.passed = false;
        record.solved = task.spec.impossible;
    } else if json.is_null() {
        record.outcome = "no-report".into();
    }
    if !record.passed {
        record.kept = Some(dir.keep().display().to_string());
    }
    Ok(Some(record))
}

/// `agent-git fix PROMPT --json ...` for one run, isolated like the tests isolate the binary:
/// no global or system git config, its own HOME; PATH and the API keys kept.
fn fix_command(plan: &EvalPlan, task: &Task, run: u32, dir: &Path) -> Result<Command, EvalError> {
    let spec = &task.spec;
    let mut cmd = Command::new(&plan.exe);
    // A task's text is given only as the value of a named option or after `--`: a prompt of
    // `--sandbox=off` is a prompt, not a flag.
    cmd.args(["fix", "--json"]);
    cmd.arg(named("--model", &plan.model_for(task)?));
    cmd.arg(named("--branch", format!("eval/run-{run}")));
    if plan.attempts > 1 {
        cmd.arg(named("--attempts", plan.attempts.to_string()));
    }
    cmd.arg(named("--repo", dir.join("repo")));
    for (flag, value) in [
        ("--test-cmd", &spec.test_cmd),
        ("--setup-cmd", &spec.setup_cmd),
        ("--max-time", &spec.max_time),
    ] {
        if let Some(value) = value {
            cmd.arg(named(flag, value));
        }
    }
    for glob in &spec.protect {
        cmd.arg(named("--protect", glob));
    }
    if let Some(turns) = spec.max_turns {
        cmd.arg(named("--max-turns", turns.to_string()));
    }
    if let Some(cost) = spec.max_cost {
        cmd.arg(named("--max-cost", cost.to_string()));
    }
    cmd.arg("--").arg(&spec.prompt);
    cmd.env_clear()
        .env("HOME", dir.join("home"))
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_SYSTEM", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("LANG", "C.UTF-8");
    for name in crate::secrets::API_KEYS {
        if let Some(value) = crate::secrets::var(name) {
            cmd.env(name, value);
        }
    }
    for name in KEPT_VARIABLES {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    for (name, value) in toolchain_homes() {
        cmd.env(name, value);
    }
    Ok(cmd)
}

/// `--flag=VALUE` as one argument, so that a value that starts with `-` stays a value.
fn named(flag: &str, value: impl AsRef<std::ffi::OsStr>) -> std::ffi::OsString {
    let mut arg = std::ffi::OsString::from(flag);
    arg.push("=");
    arg.push(value);
    arg
}

/// Where toolchains keep their installs: the run has a HOME of its own, so those that default
/// to the user's HOME (rustup, cargo, pyenv, nvm) are named where they really are.
fn toolchain_homes() -> Vec<(&'static str, std::ffi::OsString)> {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    TOOLCHAIN_HOMES
        .iter()
        .filter_map(|(name, default)| {
            let value = std::env::var_os(name).or_else(|| {
                let dir = home.as_ref()?.join(default);
                dir.is_dir().then(|| dir.into_os_string())
            })?;
            Some((*name, value))
        })
        .collect()
}

/// Toolchain variables, and where each looks under HOME when it is not set.
const TOOLCHAIN_HOMES: &[(&str, &str)] = &[
    ("RUSTUP_HOME", ".rustup"),
    ("CARGO_HOME", ".cargo"),
    ("PYENV_ROOT", ".pyenv"),
    ("NVM_DIR", ".nvm"),
];

/// What a run keeps of the eval's environment besides the API keys: where programs and temp
/// files are, and where the model servers are.
const KEPT_VARIABLES: &[&str] = &["PATH", "TMPDIR", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"];

/// Runs `cmd` as a child of its own group (see `children`), its stdout and stderr to files in
/// `dir`; on timeout or interrupt it gets SIGINT, and writes its report as a Ctrl-C'd run does.
fn wait_for(
    cmd: &mut Command,
    dir: &Path,
    timeout_secs: Option<u64>,
    interrupt: &AtomicBool,
) -> Result<Ended, EvalError> {
    let file = |name: &str| {
        let path = dir.join(name);
        std::fs::File::create(&path).map_err(|e| EvalError::io(&path, e))
    };
    cmd.stdin(Stdio::null())
        .stdout(file("fix.json")?)
        .stderr(file("fix.log")?);
    let mut child = children::spawn(cmd).map_err(|e| EvalError::io(Path::new("agent-git"), e))?;
    // An age no clock can reach is no deadline at all.
    let deadline = timeout_secs.and_then(|s| Instant::now().checked_add(Duration::from_secs(s)));
    children::wait(&mut child, deadline, interrupt).map_err(|e| EvalError::io(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_every_job_exactly_once() {
        let all = jobs(3, 4, None);
        assert_eq!(all.len(), 12);
        let mut seen: Vec<Job> = (1..=5)
            .flat_map(|index| jobs(3, 4, Some(Shard { index, count: 5 })))
            .collect();
        seen.sort_by_key(|j| (j.task, j.run));
        assert_eq!(seen, all);
        assert_eq!(
            jobs(2, 2, Some(Shard { index: 2, count: 2 })),
            vec![Job { task: 0, run: 1 }, Job { task: 1, run: 1 }]
        );
    }

    #[test]
    fn one_to_four_shards_cover_every_task_and_run_exactly_once() {
        for (tasks, runs) in [(1, 1), (3, 2), (5, 3), (7, 4)] {
            for count in 1..=4 {
                let mut seen: Vec<Job> = (1..=count)
                    .flat_map(|index| jobs(tasks, runs, Some(Shard { index, count })))
                    .collect();
                seen.sort_by_key(|j| (j.task, j.run));
                assert_eq!(
                    seen,
                    jobs(tasks, runs, None),
                    "{tasks} tasks x {runs} runs / {count}"
                );
            }
        }
    }

    #[test]
    fn shard_syntax() {
        assert_eq!(Shard::parse("2/4"), Ok(Shard { index: 2, count: 4 }));
        for bad in ["0/4", "5/4", "2", "a/b", "1/0"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }
}
