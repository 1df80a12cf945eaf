//! What a fix run settles before its branch exists: where it starts, its settings, its model
//! and budget, its tests, and the brief of its first message. Nothing here writes in the
//! repository; the clean room, outside it, is made ready meanwhile (`RoomAhead`).

use crate::agent::{Budget, SYSTEM_PROMPT};
use crate::brief::{Brief, Instructions};
use crate::model::{open_model, Model, ModelOptions, ModelSpec, Price, Reasoning, TokenLimit};
use crate::prepare::{
    plan_of_files, settings_at, tests_at, tests_for_plan, AskedPython, Confirmed, PrepareError,
    TestsAt,
};
use crate::run::RunPlan;
use crate::settings::{Layer, Settings};
use crate::text::for_terminal;
use crate::verify::RoomAhead;
use crate::workspace::{
    base_reader, base_readers, check_branch_free, open_user_repo, resolve_base,
    snapshot_working_tree, uncommitted, BaseInfo, SetupError,
};
use git2::Repository;
use std::hash::{BuildHasher, Hasher};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the user asked of a fix run, besides its settings' flags.
#[derive(Debug, Clone)]
pub struct FixRequest {
    /// What the agent is to do, as the user wrote it; the model's first message opens with it.
    pub task: String,
    /// The repository [default: the one containing the current directory].
    pub repo: Option<PathBuf>,
    /// The revision the branch starts from.
    pub base: String,
    /// The branch to create [default: from the task and the run id].
    pub branch: Option<String>,
    /// The settings the flags set.
    pub flags: Layer,
    /// Leave the run's work tree on its branch afterwards instead of giving it back to the pool.
    pub keep_worktree: bool,
    /// Where to write the whole conversation as JSON; the tests may not read it.
    pub transcript: Option<PathBuf>,
    /// Where to save every API request and response, for `--model replay:PATH`; the tests may
    /// not read it.
    pub record: Option<PathBuf>,
    /// Ask the model for whole replies instead of streamed ones.
    pub no_stream: bool,
    /// Start from the working tree as it is.
    pub dirty: bool,
    /// Leave the repository's commit hooks out.
    pub no_verify: bool,
    /// The run to go on with.
    pub resume: Option<String>,
    /// The user asked to answer the model's questions; honoured only with a terminal on stdin.
    pub interactive: bool,
    /// How commands and tests are confined.
    pub sandbox: crate::sandbox::Mode,
    /// Stop before the model when the base already passes.
    pub if_failing: bool,
    /// Prove each change of a passed run (Some(true)), never (Some(false)), or within the
    /// bounds (None).
    pub prove_hunks: Option<bool>,
    /// Which attempt of a set this run is (`fix --attempts`); the set has said what is to be
    /// said of uncommitted changes.
    pub attempt: Option<crate::attempts::AttemptOf>,
    /// Say more of what the run sets up.
    pub verbose: bool,
}

/// The repository at `path`, or the one containing the current directory.
pub(crate) fn open_at(path: Option<&Path>) -> Result<Repository, PrepareError> {
    let dir = match path {
        Some(path) => path.to_path_buf(),
        None => std::env::current_dir()
            .map_err(|e| PrepareError::Invalid(format!("no current directory: {e}")))?,
    };
    Ok(open_user_repo(&dir)?)
}

/// Every check that can fail before the branch exists. Nothing here writes anything in the
/// repository; the clean room, outside it, is made ready meanwhile (`RoomAhead`).
pub fn plan_fix(
    request: FixRequest,
    model: Option<Box<dyn Model>>,
) -> Result<RunPlan, PrepareError> {
    let started = std::time::Instant::now();
    let usage = PrepareError::Invalid;
    let repo = open_at(request.repo.as_deref())?;
    let earlier = match &request.resume {
        Some(query) => Some(earlier_attempt(&repo, query)?),
        None => None,
    };
    let base = match &earlier {
        Some(attempt) => attempt.base.clone(),
        None => starting_point(&repo, &request)?,
    };
    // With --if-failing, only once it is known that a run follows (below).
    let said_by_set = request.attempt.is_some();
    let uncommitted = (earlier.is_none() && !request.dirty && !request.if_failing && !said_by_set)
        .then(|| look_at_uncommitted(repo.path()));
    let flags = request.flags.clone();
    let settings = settings_at(&repo, base.id, flags)?;
    // A model that cannot be used as configured (no key, a bad name) is said before the clean
    // room starts a checkout: a plan that ends in an error waits for that (seconds on a large
    // repository's first run).
    let chosen = match model {
        Some(model) => Chosen::Given(model),
        None => {
            let (spec, options) = configured_model(&settings, &request)?;
            crate::model::check_credentials(&spec, &options).map_err(usage)?;
            Chosen::Configured(spec, options)
        }
    };
    // Where a test run will come, the clean room is made ready meanwhile.
    let ahead = || -> Result<RoomAhead, PrepareError> {
        let tree = repo
            .find_commit(base.id)
            .map_err(SetupError::from)?
            .tree_id();
        let objects = repo.commondir().join("objects");
        let workdir = repo.workdir().map(std::path::Path::to_path_buf);
        Ok(RoomAhead::start(objects, workdir, tree))
    };
    let mut room_ahead = match request.if_failing && earlier.is_none() {
        true => None,
        false => Some(ahead()?),
    };

    // Opened once the room has started: its HTTP client takes some milliseconds to make.
    let (model, reasoning) = match chosen {
        Chosen::Given(model) => (model, Reasoning::Off),
        Chosen::Configured(spec, options) => {
            let model = open_model(&spec, &options).map_err(usage)?;
            (model, options.reasoning)
        }
    };
    let budget = budget(
        &settings,
        model.model_name(),
        settings.context_window.or(model.context_window()),
        settings.max_command_timeout,
        started,
    )
    .map_err(usage)?;
    let sandbox = request.sandbox;
    // python3 is asked beside the run where an earlier run's answer is remembered; the run
    // holds its plan to the answer before the plan counts (`RunPlan::hold_to_python`).
    let mut python = AskedPython::remembering();
    let (tests_at, tested_as, passed_before) = if earlier.is_none() && request.if_failing {
        tests_unless_passed(&repo, base.id, &settings, sandbox)?
    } else {
        let tests_at = match tests_at(&repo, base.id, &settings, &mut python) {
            Ok(found) => found,
            // Remembered facts may not stop a run: only python3's answer can.
            Err(e) => match python.confirm() {
                Confirmed::Same => return Err(e),
                Confirmed::Changed => tests_at(&repo, base.id, &settings, &mut python)?,
            },
        };
        let tested_as = crate::check::identity(&tests_at.plan, &settings, sandbox);
        (tests_at, tested_as, None)
    };
    if request.if_failing
        && !request.dirty
        && !said_by_set
        && earlier.is_none()
        && passed_before.is_none()
    {
        say_uncommitted(&repo);
    }
    if room_ahead.is_none() && passed_before.is_none() {
        room_ahead = Some(ahead()?);
    }
    let brief = match passed_before {
        // Never sent: the model is not asked.
        Some(_) => Brief::new(Box::new(Vec::new), Box::new(|_| None), 0, None),
        None => {
            let (list_files, base_read) = base_reader(&repo, base.id)?;
            Brief::new(
                list_files,
                base_read,
                settings.map_tokens,
                budget.context_window,
            )
            .reading_beside(base_readers(&repo, base.id)?)
        }
    };
    let TestsAt {
        plan: tests,
        protection,
        allow_write,
        allow_read,
    } = tests_at;
    let (run_id, branch, task, resume) = match earlier {
        Some(attempt) => (
            attempt.run_id,
            attempt.branch,
            attempt.task,
            Some(attempt.messages),
        ),
        None => {
            let run_id = new_run_id();
            let branch = request
                .branch
                .clone()
                .unwrap_or_else(|| format!("agent/{}-{run_id}", slug(&request.task)));
            check_branch_free(&repo, &branch)?;
            (run_id, branch, request.task.clone(), None)
        }
    };
    Ok(RunPlan {
        uncommitted: crate::run::Pending::new(uncommitted),
        tested_as,
        passed_before,
        repo,
        base,
        branch,
        run_id,
        task,
        model,
        protection,
        tests,
        budget,
        system: SYSTEM_PROMPT.to_string(),
        brief,
        keep_worktree: request.keep_worktree,
        private_files: [&request.record, &request.transcript]
            .into_iter()
            .flatten()
            .cloned()
            .collect(),
        transcript: request.transcript,
        only_if_failing: request.if_failing,
        interactive: interactive(request.interactive),
        run_hooks: !request.no_verify,
        notes: Vec::new(),
        resume,
        sandbox,
        allow_write,
        allow_read,
        max_file_size: settings.max_file_size,
        started,
        room_ahead: std::cell::Cell::new(room_ahead),
        reasoning,
        prove: crate::verify::ProveLimits {
            asked: request.prove_hunks,
            ..Default::default()
        },
        python,
        settings,
        attempt: request.attempt,
        verbose: request.verbose,
        events: None,
    })
}

/// For `--if-failing`: the tests of `base`, the key of their passes, and the summary of the
/// pass the record holds for the base's tree under that key, if any. With one, nothing will
/// run, so the protection (which costs a walk of the whole tree) is left empty.
fn tests_unless_passed(
    repo: &Repository,
    base: git2::Oid,
    settings: &Settings,
    sandbox: crate::sandbox::Mode,
) -> Result<(TestsAt, String, Option<String>), PrepareError> {
    let mut python = AskedPython::default();
    let files = crate::workspace::tree_files(repo, base).map_err(PrepareError::from)?;
    let plan = plan_of_files(repo, base, &files, settings, &mut python)?;
    let tested_as = crate::check::identity(&plan, settings, sandbox);
    let tree = repo.find_commit(base).map_err(SetupError::from)?.tree_id();
    if let Some(found) = crate::workspace::tested(repo, tree, &tested_as) {
        let protection = crate::guard::Protection::new(&[], &[]).map_err(PrepareError::Invalid)?;
        let nothing = TestsAt {
            plan,
            protection,
            allow_write: Vec::new(),
            allow_read: Vec::new(),
        };
        return Ok((nothing, tested_as, Some(found.summary)));
    }
    let tests_at = tests_for_plan(repo, base, &files, settings, &mut python, plan)?;
    Ok((tests_at, tested_as, None))
}

/// A run that stopped, to go on with: its branch, id, base, task and conversation.
struct Attempt {
    run_id: String,
    branch: String,
    base: BaseInfo,
    task: String,
    messages: Vec<crate::model::Message>,
}

/// The run `query` names, if it can be resumed: it ended without passing, and its
/// conversation is stored.
fn earlier_attempt(repo: &Repository, query: &str) -> Result<Attempt, PrepareError> {
    let usage = |e: &dyn std::fmt::Display| PrepareError::Invalid(e.to_string());
    let runs = crate::runs::list(repo).map_err(|e| usage(&e))?;
    let run = crate::runs::resolve(&runs, query).map_err(|e| usage(&e))?;
    if run.running {
        return Err(usage(&format!("run {} is still going", run.run_id)));
    }
    if matches!(run.outcome.as_str(), "passed" | "already-passing") {
        return Err(usage(&format!(
            "run {} passed; there is nothing to resume (`agent-git apply {}` lands it)",
            run.run_id, run.branch
        )));
    }
    let places =
        crate::workspace::discard::checked_out(repo, &format!("refs/heads/{}", run.branch));
    if let Some((_, place)) = places.first() {
        return Err(usage(&format!(
            "the branch {} of run {} is checked out in {place} (a kept work tree?); remove that \
             work tree (`git worktree remove PATH`) or switch it to another branch, then resume",
            run.branch, run.run_id
        )));
    }
    let base = run.base.ok_or_else(|| {
        usage(&format!(
            "the report of run {} names no base commit",
            run.run_id
        ))
    })?;
    let transcript = crate::runs::transcript(repo, run).map_err(|e| usage(&e))?;
    let messages = serde_json::from_value(transcript["messages"].clone()).map_err(|e| {
        usage(&format!(
            "the stored transcript of run {} cannot be read: {e}",
            run.run_id
        ))
    })?;
    let summary = repo
        .find_commit(base)
        .ok()
        .and_then(|c| c.summary().ok().flatten().map(str::to_string))
        .unwrap_or_default();
    Ok(Attempt {
        run_id: run.run_id.clone(),
        branch: run.branch.clone(),
        base: BaseInfo { id: base, summary },
        task: run.task.clone(),
        messages,
    })
}

/// The run's base: the commit `--base` names, or with `--dirty` a commit of the working tree
/// as it is.
fn starting_point(repo: &Repository, request: &FixRequest) -> Result<BaseInfo, PrepareError> {
    if request.dirty {
        if request.base != "HEAD" {
            return Err(PrepareError::Invalid(
                "--dirty starts from your working tree on top of HEAD; it cannot be combined \
                 with --base"
                    .into(),
            ));
        }
        resolve_base(repo, "HEAD")?;
        return Ok(snapshot_working_tree(repo)?);
    }
    Ok(resolve_base(repo, &request.base)?)
}

/// The line that says uncommitted tracked changes of the checkout of the repository at
/// `git_dir` are left out of the run; None where there are none. A status of the whole
/// checkout, taken only where a run will come.
fn uncommitted_line(git_dir: &Path) -> Option<String> {
    let repo = Repository::open(git_dir).ok()?;
    let changed = uncommitted(&repo).unwrap_or_default();
    let first = changed.first()?;
    Some(format!(
        "your uncommitted changes are not part of this run ({} changed tracked files, e.g. \
         {first}); commit them, or pass --dirty to start from them",
        changed.len(),
    ))
}

/// `uncommitted_line`, looked at in a thread of its own once the model is first asked (or
/// something waits for the line): what lets it go on comes with it. Nothing before the first
/// request waits for it, and on two cores, going from the start, it took a core from the
/// base's test and then from the brief (about 80 ms of a second run's first request at
/// 100,000 files). It yields to the run (nice 10), and goes after the pooled tree's
/// preparation, which the first tool call waits for (where a file is in doubt, its full status
/// holds a whole index, 17 MiB at 100,000 files, as that preparation does). Where nothing will
/// ask for the line any more (the run ended before the model), it does not look.
pub(crate) fn look_at_uncommitted(git_dir: &Path) -> (crate::run::Notice, crate::run::Go) {
    let git_dir = git_dir.to_path_buf();
    let (go, asked) = std::sync::mpsc::channel::<()>();
    let look = std::thread::spawn(move || {
        asked.recv().ok()?;
        // A thread's nice value is its own on Linux; raising it needs no privilege.
        let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 10);
        let line = {
            let _one = crate::memory::one_index_at_a_time();
            uncommitted_line(&git_dir)
        };
        crate::memory::give_back();
        line
    });
    (look, go)
}

/// Says, on stderr, whether uncommitted tracked changes are left out: before a run that
/// answers first whether the base already passes, and for a set of attempts, once for them
/// all.
pub(crate) fn say_uncommitted(repo: &Repository) {
    if let Some(line) = uncommitted_line(repo.path()) {
        eprintln!("agent-git: {}", for_terminal(&line));
    }
}

/// Whether someone can answer the model's questions: asked for, and a terminal to ask at.
fn interactive(asked: bool) -> bool {
    let terminal = std::io::stdin().is_terminal();
    if asked && !terminal {
        eprintln!(
            "agent-git: --interactive needs a terminal on stdin; the model will be told that \
             nobody is available"
        );
    }
    asked && terminal
}

/// The instructions file of the repository `repo` names, at `base`, if there is one.
pub fn instructions_at(repo: Option<&Path>, base: &str) -> Option<Instructions> {
    let repo = open_at(repo).ok()?;
    let base = resolve_base(&repo, base).ok()?;
    let (_, read) = base_reader(&repo, base.id).ok()?;
    Instructions::find(&read)
}

/// The model a run is given (a test's), or the one its settings name, checked but not opened.
enum Chosen {
    Given(Box<dyn Model>),
    Configured(ModelSpec, ModelOptions),
}

/// The model the settings name, and how it is to be asked; nothing is opened.
fn configured_model(
    settings: &Settings,
    request: &FixRequest,
) -> Result<(ModelSpec, ModelOptions), PrepareError> {
    let usage = PrepareError::Invalid;
    let spec = match ModelSpec::parse(&model_spec(settings)?).map_err(usage)? {
        // A directory of scripts, one per attempt: one run takes the first.
        ModelSpec::Script(dir) if dir.is_dir() => {
            let files = crate::attempts::script_files(&dir).map_err(usage)?;
            let first = files
                .into_iter()
                .next()
                .ok_or_else(|| usage(format!("script:{} holds no JSON file", dir.display())))?;
            ModelSpec::Script(first)
        }
        spec => spec,
    };
    let token_limit = settings
        .token_param
        .as_deref()
        .map(TokenLimit::parse)
        .transpose()
        .map_err(usage)?;
    let options = ModelOptions {
        max_tokens: settings.max_tokens,
        token_limit,
        max_retries: settings.max_retries,
        request_timeout: Duration::from_secs(settings.request_timeout),
        record: request.record.clone(),
        context_window: settings.context_window,
        stream: !request.no_stream,
        reasoning: Reasoning::settle(&spec, settings.thinking, settings.reasoning_effort)
            .map_err(usage)?,
    };
    Ok((spec, options))
}

/// The model spec the settings name.
pub(crate) fn model_spec(settings: &Settings) -> Result<String, PrepareError> {
    settings.model.clone().ok_or_else(|| {
        PrepareError::Invalid(
            "no model given; pass --model anthropic:MODEL (or openai:MODEL, script:PATH), \
             or set AGENT_GIT_MODEL, or run `git config agent-git.model SPEC`"
                .to_string(),
        )
    })
}

/// The run's limits, its time counted from `started`. A cost limit needs a price: from config, else the built-in table.
fn budget(
    settings: &Settings,
    model_name: Option<String>,
    window: Option<u64>,
    max_command_secs: u64,
    started: std::time::Instant,
) -> Result<Budget, String> {
    let price = match (&settings.price, &model_name) {
        (Some(text), _) => Some(Price::parse(text)?),
        (None, Some(name)) => Price::for_model(name),
        // Scripts cost nothing.
        (None, None) => Some(Price::FREE),
    };
    if let (Some(_), None) = (settings.max_cost, price) {
        return Err(format!(
            "--max-cost needs the price of {}; set it with `git config agent-git.price \"INPUT OUTPUT\"` \
             (dollars per million tokens)",
            model_name.as_deref().unwrap_or("the model")
        ));
    }
    Ok(Budget {
        max_command_secs,
        max_turns: settings.max_turns,
        max_cost: settings.max_cost,
        price,
        context_window: window.or_else(|| model_name.as_deref().map(context_window_of)),
        // From the command's start: the time the user waits is what the budget bounds.
        max_time: settings.max_time,
        deadline: settings.max_time.map(|time| started + time),
    })
}

/// Published context windows, by model name; unknown models get a cautious 128k.
fn context_window_of(model: &str) -> u64 {
    crate::model::published_window(model).unwrap_or(128_000)
}

/// Eight hex digits, different for every run (std's hasher keys are random per process).
pub(crate) fn new_run_id() -> String {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.write_u32(std::process::id());
    format!("{:08x}", hasher.finish() as u32)
}

/// A branch-name-safe digest of the task: `fix-the-adder`.
pub fn slug(task: &str) -> String {
    let mut slug = String::new();
    for c in task.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
        if slug.len() >= 40 {
            break;
        }
    }
    let slug = slug.trim_end_matches('-').to_string();
    if slug.is_empty() {
        "task".to_string()
    } else {
        slug
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_short_and_safe() {
        assert_eq!(
            slug("The tests in test_calc.py fail. Fix it!"),
            "the-tests-in-test-calc-py-fail-fix-it"
        );
        assert_eq!(slug("   ...   "), "task");
        assert!(slug(&"word ".repeat(30)).len() <= 40);
        assert_eq!(slug("Überprüfe den Code"), "berpr-fe-den-code");
    }

    /// The look at the user's checkout waits for the model's first request: nothing of it is
    /// read before that. Where the run ends without asking for the line (what lets the look go
    /// on is gone), it does not look at all.
    #[test]
    fn the_look_at_the_checkout_waits_for_the_first_request() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        std::fs::write(dir.path().join("a.py"), "x = 1\n").unwrap();
        let mut index = repo.index().unwrap();
        index.add_path(Path::new("a.py")).unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let who = git2::Signature::new("t", "t@example.com", &git2::Time::new(0, 0)).unwrap();
        repo.commit(Some("HEAD"), &who, &who, "base", &tree, &[])
            .unwrap();
        std::fs::write(dir.path().join("a.py"), "x = 22\n").unwrap();

        let (look, go) = look_at_uncommitted(repo.path());
        std::thread::sleep(Duration::from_millis(200));
        assert!(!look.is_finished(), "it looked before the model was asked");
        go.send(()).unwrap();
        let line = look.join().unwrap().expect("the change is said");
        assert!(
            line.contains("1 changed tracked files, e.g. a.py"),
            "{line}"
        );

        let (look, go) = look_at_uncommitted(repo.path());
        drop(go);
        assert_eq!(look.join().unwrap(), None, "it looked for nobody");
    }

    #[test]
    fn run_ids_differ() {
        let a = new_run_id();
        assert_eq!(a.len(), 8);
        assert_ne!(a, new_run_id());
    }
}
