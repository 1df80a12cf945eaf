//! Best-of-N (`fix --attempts N --jobs J`): N independent runs from one base, each an
//! ordinary `agent-git fix` in a child process with its own branch, work tree and sandbox, J
//! at a time; then the tests decide between them (`choose`), and one summary lists them all.
//! The summary is printed and stored in the repository (`workspace::sets`), where `runs`,
//! `show` and `apply` find it; the attempts stay ordinary runs.

mod choose;
mod summary;

pub use choose::{choose, Standing};
pub use summary::{AttemptEnd, SetSummary};

use crate::prepare::PrepareError;
use crate::settings::Layer;
use git2::Repository;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::ffi::OsString;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Which attempt of which set a run is: its report's `Agent-Attempt: s1a2b3c4 2/3`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptOf {
    /// The set's id: `s` and hex digits.
    pub set: String,
    /// From 1.
    pub index: u32,
    /// How many attempts the set has; at least `index`.
    pub of: u32,
}

impl AttemptOf {
    /// The trailer's value: `s1a2b3c4 2/3`.
    pub fn trailer(&self) -> String {
        format!("{} {}/{}", self.set, self.index, self.of)
    }

    /// The trailer's value read back.
    pub fn parse(text: &str) -> Option<AttemptOf> {
        let (set, place) = text.trim().split_once(' ')?;
        let (index, of) = place.split_once('/')?;
        let attempt = AttemptOf {
            set: set.to_string(),
            index: index.parse().ok()?,
            of: of.parse().ok()?,
        };
        (crate::workspace::sets::is_set_id(set)
            && attempt.index >= 1
            && attempt.index <= attempt.of)
            .then_some(attempt)
    }
}

/// What the set gives one attempt, passed to its process as `fix --attempt-of JSON`: it
/// replaces what the user's arguments say of these.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    /// Which attempt it is.
    pub of: AttemptOf,
    /// The model spec: a script directory's file for this attempt, else the set's spec.
    pub model: String,
    /// The base commit, resolved once for the whole set.
    pub base: String,
    /// The attempt's branch: the user's `--branch` with `-K` added; None to let the run name it.
    pub branch: Option<String>,
    /// The attempt's share of what is left of the set's cost budget.
    pub max_cost: Option<f64>,
    /// What is left of the set's time budget when the attempt starts, in seconds.
    pub max_time_secs: Option<f64>,
}

impl Assignment {
    /// Reads `--attempt-of`'s JSON; errs when it is not one or names no valid attempt.
    pub fn parse(text: &str) -> Result<Assignment, String> {
        let assignment: Assignment = serde_json::from_str(text)
            .map_err(|e| format!("--attempt-of is not an assignment: {e}"))?;
        // Held to the trailer's own rules: a set id, and 1 <= index <= of.
        match AttemptOf::parse(&assignment.of.trailer()) {
            Some(of) if of == assignment.of => Ok(assignment),
            _ => Err(format!(
                "--attempt-of names no attempt of a set: {}",
                crate::text::one_line(&assignment.of.trailer())
            )),
        }
    }

    /// The flags layer the assignment makes of the user's one.
    pub fn apply_to(&self, flags: &mut Layer) {
        flags.model = Some(self.model.clone());
        if let Some(cost) = self.max_cost {
            flags.max_cost = Some(cost);
        }
        if let Some(secs) = self.max_time_secs {
            flags.max_time = Some(Duration::from_secs_f64(secs.max(0.0)));
        }
    }
}

/// What the user asked of a set.
#[derive(Debug, Clone)]
pub struct SetRequest {
    /// How many runs (N of `--attempts N`).
    pub attempts: u32,
    /// How many run at once (`--jobs`); held to 1..=attempts.
    pub jobs: u32,
    /// The repository [default: the one containing the current directory].
    pub repo: Option<PathBuf>,
    /// The revision every attempt starts from, resolved once.
    pub base: String,
    /// Start from the working tree as it is (one snapshot for every attempt).
    pub dirty: bool,
    /// The branch name attempt K gets with `-K` added; None lets each run name its own.
    pub branch: Option<String>,
    /// The settings the flags set; the model and budgets are read from them for the set.
    pub flags: Layer,
    /// The user's arguments after `fix`, given to every attempt as they are.
    pub args: Vec<OsString>,
    /// The agent-git binary each attempt runs.
    pub exe: PathBuf,
}

/// How the set went.
pub struct SetOutcome {
    /// The choice and each attempt's standing, as printed and stored.
    pub summary: SetSummary,
    /// The chosen attempt's exit code; where none ended with a report, 2 when each was
    /// refused before it started (a usage error), else 4; 130 when interrupted.
    pub exit_code: u8,
}

/// Runs the set: every attempt, J at a time, then the choice, the summary stored in git.
pub fn run_set(
    request: &SetRequest,
    interrupt: &AtomicBool,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<SetOutcome, PrepareError> {
    let usage = PrepareError::Invalid;
    let started = Instant::now();
    let repo = crate::start::open_at(request.repo.as_deref())?;
    let base = match request.dirty {
        true => crate::workspace::snapshot_working_tree(&repo)?,
        false => crate::workspace::resolve_base(&repo, &request.base)?,
    };
    let settings = crate::prepare::settings_at(&repo, base.id, request.flags.clone())?;
    let spec = crate::start::model_spec(&settings)?;
    crate::model::ModelSpec::parse(&spec).map_err(usage)?;
    let models = models_for(&spec, request.attempts).map_err(usage)?;
    let branches: Vec<Option<String>> = (1..=request.attempts)
        .map(|k| request.branch.as_ref().map(|name| format!("{name}-{k}")))
        .collect();
    for branch in branches.iter().flatten() {
        crate::workspace::check_branch_free(&repo, branch)?;
    }
    if !request.dirty {
        crate::start::say_uncommitted(&repo);
    }
    let set = new_set_id();
    let repo = Mutex::new(repo);
    progress(&format!(
        "{} attempts from {} ({}), {} at a time: set {set}",
        request.attempts,
        &base.id.to_string()[..7],
        base.summary,
        request.jobs.min(request.attempts)
    ));
    let ledger = Mutex::new(Ledger::new(settings.max_cost, request.attempts));
    let deadline = settings.max_time.map(|t| started + t);
    let ends: Vec<Mutex<Option<AttemptEnd>>> =
        (0..request.attempts).map(|_| Mutex::new(None)).collect();
    let next = Mutex::new(0u32);
    std::thread::scope(|scope| {
        for _ in 0..request.jobs.clamp(1, request.attempts) {
            scope.spawn(|| loop {
                if interrupt.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let index = {
                    let mut next = next.lock().unwrap_or_else(|e| e.into_inner());
                    if *next >= request.attempts {
                        break;
                    }
                    *next += 1;
                    *next
                };
                let slot = (index - 1) as usize;
                let assignment = Assignment {
                    of: AttemptOf {
                        set: set.clone(),
                        index,
                        of: request.attempts,
                    },
                    model: models[slot].clone(),
                    base: base.id.to_string(),
                    branch: branches[slot].clone(),
                    max_cost: None,
                    max_time_secs: None,
                };
                let end = attempt(
                    request, &repo, assignment, &ledger, deadline, interrupt, progress,
                );
                *ends[slot].lock().unwrap_or_else(|e| e.into_inner()) = Some(end);
            });
        }
    });
    let ends: Vec<AttemptEnd> = ends
        .into_iter()
        .enumerate()
        .map(|(i, end)| {
            end.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .unwrap_or_else(|| {
                    AttemptEnd::not_started(i as u32 + 1, "interrupted before it started")
                })
        })
        .collect();
    let summary = SetSummary::new(set, base.id.to_string(), settings.max_cost, ends);
    let exit_code = summary.exit_code(interrupt.load(std::sync::atomic::Ordering::SeqCst));
    let repo = repo.into_inner().unwrap_or_else(|e| e.into_inner());
    if let Err(e) = crate::workspace::sets::store_set(&repo, &summary.set, &summary.message()) {
        progress(&format!(
            "cannot store the summary of set {} in git: {e}",
            summary.set
        ));
    }
    Ok(SetOutcome { summary, exit_code })
}

/// The model spec of each attempt: with `script:DIR`, the DIR's JSON files in name order, one
/// per attempt; any other spec is every attempt's.
fn models_for(spec: &str, attempts: u32) -> Result<Vec<String>, String> {
    let dir = spec
        .strip_prefix("script:")
        .map(Path::new)
        .filter(|p| p.is_dir());
    let Some(dir) = dir else {
        return Ok(vec![spec.to_string(); attempts as usize]);
    };
    let files = script_files(dir)?;
    if files.len() < attempts as usize {
        return Err(format!(
            "--model script:{} gives one script per attempt, and holds {} JSON files for {attempts} \
             attempts",
            dir.display(),
            files.len()
        ));
    }
    Ok(files
        .iter()
        .take(attempts as usize)
        .map(|f| format!("script:{}", f.display()))
        .collect())
}

/// The `*.json` files of a script directory, in name order.
pub fn script_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read the script directory {}: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    Ok(files)
}

/// A set's id: `s` and eight hex digits, never a run id (those are hex alone).
fn new_set_id() -> String {
    format!("s{}", crate::start::new_run_id())
}

/// The set's cost budget across its attempts: each attempt starts with an even share of what
/// neither a finished attempt spent nor a running one may still spend.
#[derive(Debug)]
struct Ledger {
    max_cost: Option<f64>,
    spent: f64,
    reserved: f64,
    not_started: u32,
}

impl Ledger {
    fn new(max_cost: Option<f64>, attempts: u32) -> Ledger {
        Ledger {
            max_cost,
            spent: 0.0,
            reserved: 0.0,
            not_started: attempts,
        }
    }

    /// The cap of the attempt about to start: Ok(None) without a cost budget, Err when what
    /// is left is too little to start one.
    fn start(&mut self) -> Result<Option<f64>, String> {
        let share = self.max_cost.map(|max| {
            let left = (max - self.spent - self.reserved).max(0.0);
            left / f64::from(self.not_started.max(1))
        });
        self.not_started = self.not_started.saturating_sub(1);
        match share {
            Some(share) if share < MIN_SHARE => Err(format!(
                "not started: the set's cost budget of ${:.4} is spent",
                self.max_cost.unwrap_or(0.0)
            )),
            Some(share) => {
                self.reserved += share;
                Ok(Some(share))
            }
            None => Ok(None),
        }
    }

    /// An attempt given `cap` ended, having spent `cost`.
    fn end(&mut self, cap: Option<f64>, cost: Option<f64>) {
        if let Some(cap) = cap {
            self.reserved = (self.reserved - cap).max(0.0);
            // A run checks its budget before each call, so it may spend a call past its cap;
            // one whose cost is unknown may have spent all it was given.
            self.spent += cost.unwrap_or(cap);
        }
    }
}

/// Less than this, in dollars, buys no model call worth starting an attempt for.
const MIN_SHARE: f64 = 0.0001;

/// Less time than this left is too little to set up a run, ask the model and test.
const MIN_TIME: Duration = Duration::from_secs(2);

/// One attempt: its share of the budgets, its process, its end.
fn attempt(
    request: &SetRequest,
    repo: &Mutex<Repository>,
    mut assignment: Assignment,
    ledger: &Mutex<Ledger>,
    deadline: Option<Instant>,
    interrupt: &AtomicBool,
    progress: &(dyn Fn(&str) + Sync),
) -> AttemptEnd {
    let index = assignment.of.index;
    let label = format!("[{index}/{}]", assignment.of.of);
    let cap = match ledger.lock().unwrap_or_else(|e| e.into_inner()).start() {
        Ok(cap) => cap,
        Err(why) => {
            progress(&format!("attempt {label} {why}"));
            return AttemptEnd::not_started(index, &why);
        }
    };
    assignment.max_cost = cap;
    if let Some(deadline) = deadline {
        let left = deadline.saturating_duration_since(Instant::now());
        if left < MIN_TIME {
            ledger
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .end(cap, Some(0.0));
            let why = "not started: the set's time budget is spent";
            progress(&format!("attempt {label} {why}"));
            return AttemptEnd::not_started(index, why);
        }
        assignment.max_time_secs = Some(left.as_secs_f64());
    }
    let ran = spawn_attempt(request, &assignment, &label, interrupt);
    let end = match ran {
        Ok((code, json, last_line)) => {
            let repo = repo.lock().unwrap_or_else(|e| e.into_inner());
            AttemptEnd::of_run(&repo, index, code, json, last_line)
        }
        Err(e) => AttemptEnd::not_started(index, &format!("could not start: {e}")),
    };
    ledger
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .end(cap, end.cost);
    progress(&format!("attempt {label} ended: {}", end.line()));
    end
}

/// Runs the attempt's process to its end: its exit code, its `--json` report (Null when it
/// printed none), and its last line on stderr. Its stderr is shown as it comes, each line
/// marked with the attempt.
fn spawn_attempt(
    request: &SetRequest,
    assignment: &Assignment,
    label: &str,
    interrupt: &AtomicBool,
) -> std::io::Result<(Option<i32>, Value, String)> {
    let json = serde_json::to_string(assignment).map_err(std::io::Error::other)?;
    let mut attempt_of = OsString::from("--attempt-of=");
    attempt_of.push(json);
    let mut cmd = Command::new(&request.exe);
    cmd.arg("fix")
        .arg(attempt_of)
        .args(&request.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // The keys left this process's environment when it started; each attempt needs them.
    for name in crate::secrets::API_KEYS {
        if let Some(value) = crate::secrets::var(name) {
            cmd.env(name, value);
        }
    }
    let mut child = crate::children::spawn(&mut cmd)?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let (code, out, last) = std::thread::scope(|scope| {
        let out = scope.spawn(move || {
            let mut text = String::new();
            if let Some(mut stdout) = stdout {
                let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
            }
            text
        });
        let last = scope.spawn(move || {
            let mut last = String::new();
            let Some(stderr) = stderr else {
                return last;
            };
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("{}", marked(&line, label));
                if !line.trim().is_empty() {
                    last = line;
                }
            }
            last
        });
        let code = crate::children::wait(&mut child, None, interrupt)
            .and_then(|_| child.wait())
            .map(|status| status.code());
        (
            code,
            out.join().unwrap_or_default(),
            last.join().unwrap_or_default(),
        )
    });
    let json = serde_json::from_str(out.trim()).unwrap_or(Value::Null);
    Ok((code?, json, last))
}

/// A line of an attempt's stderr as the set shows it: `agent-git [2/3]: ...`.
fn marked(line: &str, label: &str) -> String {
    match line.strip_prefix("agent-git: ") {
        Some(rest) => format!("agent-git {label}: {rest}"),
        None => format!("{label} {line}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_attempt_gets_an_even_share_of_what_is_left() {
        let mut ledger = Ledger::new(Some(0.9), 3);
        let first = ledger.start().unwrap().unwrap();
        assert!((first - 0.3).abs() < 1e-9);
        ledger.end(Some(first), Some(0.1));
        // 0.8 left for two.
        let second = ledger.start().unwrap().unwrap();
        assert!((second - 0.4).abs() < 1e-9);
        // Running beside the second, the third gets what the second cannot spend.
        let third = ledger.start().unwrap().unwrap();
        assert!((third - 0.4).abs() < 1e-9);
        assert!(
            0.1 + second + third <= 0.9 + 1e-9,
            "spent and reserved stay in budget"
        );
        // A run may spend a call past its cap: what it spent is what is gone.
        let mut spent = Ledger::new(Some(0.1), 2);
        let cap = spent.start().unwrap();
        spent.end(cap, Some(0.1));
        assert_eq!(
            spent.start(),
            Err("not started: the set's cost budget of $0.1000 is spent".to_string())
        );
        assert_eq!(Ledger::new(None, 2).start(), Ok(None));
        // One whose cost is unknown may have spent all it was given.
        let mut unknown = Ledger::new(Some(0.1), 2);
        let cap = unknown.start().unwrap();
        unknown.end(cap, None);
        assert_eq!(unknown.start(), Ok(Some(0.05)));
    }

    #[test]
    fn the_caps_of_running_attempts_never_add_up_past_the_budget() {
        let mut ledger = Ledger::new(Some(1.0), 4);
        let caps: Vec<f64> = (0..4).map(|_| ledger.start().unwrap().unwrap()).collect();
        assert!(caps.iter().sum::<f64>() <= 1.0 + 1e-9, "{caps:?}");
    }

    #[test]
    fn an_attempt_trailer_reads_back() {
        let of = AttemptOf {
            set: "s0a1b2c3".into(),
            index: 2,
            of: 3,
        };
        assert_eq!(of.trailer(), "s0a1b2c3 2/3");
        assert_eq!(AttemptOf::parse("s0a1b2c3 2/3"), Some(of));
        for bad in ["s0a1 4/3", "x12 1/2", "s0a1 0/2", "s0a1", "s0a1 a/b"] {
            assert_eq!(AttemptOf::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_script_directory_gives_each_attempt_its_file() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["2.json", "1.json", "notes.txt", "3.json"] {
            std::fs::write(dir.path().join(name), "[]").unwrap();
        }
        let spec = format!("script:{}", dir.path().display());
        let models = models_for(&spec, 2).unwrap();
        assert_eq!(
            models,
            vec![
                format!("script:{}", dir.path().join("1.json").display()),
                format!("script:{}", dir.path().join("2.json").display()),
            ]
        );
        let err = models_for(&spec, 4).unwrap_err();
        assert!(err.contains("holds 3 JSON files for 4 attempts"), "{err}");
        assert_eq!(
            models_for("anthropic:claude-sonnet-4-5", 2).unwrap(),
            vec!["anthropic:claude-sonnet-4-5".to_string(); 2]
        );
    }

    #[test]
    fn an_attempts_lines_are_marked() {
        assert_eq!(
            marked("agent-git: tests pass", "[2/3]"),
            "agent-git [2/3]: tests pass"
        );
        assert_eq!(marked("warning: x", "[1/3]"), "[1/3] warning: x");
    }
}
