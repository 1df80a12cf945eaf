//! `agent-git check [REV]` and `agent-git check --pre-push REMOTE URL`: test commits in a clean
//! room (a tree that passed before is not tested again) and, for a push, decide whether it
//! goes on.

use super::CliError;
use crate::check::{
    commits_to_test, decide, describe, parse_updates, start_fix, Checked, Checker, Decision,
    HookConfig, HookMode, RefUpdate, Verdict,
};
use crate::model::ModelSpec;
use crate::settings::Layer;
use crate::workspace::{resolve_base, SetupError};
use clap::Args;
use git2::Repository;
use std::io::Read;

/// What `agent-git check --help` prints after the flags: the pre-push hook's git config and the
/// exit codes.
pub const CHECK_HELP: &str = "\
As a pre-push hook (agent-git hook install), by git config:
  agent-git.prePush          off, warn (say what fails, push anyway), block (refuse a push
                             whose tests fail; the default) or fix (refuse, and start
                             agent-git fix on the failing commit in the background)
  agent-git.prePush.commits  tip (each pushed ref's commit; the default) or all (every
                             commit the remote does not have)
  agent-git.prePush.strict   true: in block and fix mode, refuse also when the tests could
                             not be run
A tree that passed before with the same test set-up is not tested again (the passes are
files in .git/agent-git/tested/, this clone's own). AGENT_GIT_SKIP=1 skips the check.

Exit codes:
  0    the tests pass (with --pre-push: the push may go on)
  1    the tests fail (with --pre-push: the push is refused)
  2    usage or setup error (not a repository, unknown revision)
  4    the tests could not be run (no test command found, a broken one)";

/// What `agent-git check` takes: one commit to test, or with `--pre-push` what git passes a
/// pre-push hook.
#[derive(Debug, Args)]
#[command(after_help = CHECK_HELP)]
pub struct CheckArgs {
    /// The commit to test [default: HEAD]. With --pre-push: the remote's name and URL, as git
    /// passes them to a pre-push hook.
    #[arg(value_name = "REV | REMOTE URL")]
    pub args: Vec<String>,
    /// Read git's pre-push input on stdin and test what is pushed; git config
    /// agent-git.prePush decides what happens when the tests fail.
    #[arg(long)]
    pub pre_push: bool,
    /// Print one JSON object instead of the verdict: commit, ref, outcome, reason and tests,
    /// named as `fix --json` names them.
    #[arg(long, conflicts_with = "pre_push")]
    pub json: bool,
    /// Which repository (`--repo`); by default the one containing the current directory.
    #[command(flatten)]
    pub repo: super::RepoArg,
}

/// Tests the commit, or with `--pre-push` what is pushed; the exit code is one `CHECK_HELP` lists
/// (0 passed, 1 failed, 4 could not be tested; with `--pre-push` 0 lets the push go on and 1
/// refuses it).
pub fn run(args: CheckArgs) -> Result<u8, CliError> {
    if args.pre_push {
        return Ok(pre_push(args));
    }
    let [rev] = match args.args.as_slice() {
        [] => ["HEAD".to_string()],
        [rev] => [rev.clone()],
        _ => {
            return Err(CliError::Usage(
                "check takes one revision; to check a push, pass --pre-push REMOTE URL".into(),
            ))
        }
    };
    let repo = args.repo.open()?;
    let base = resolve_base(&repo, &rev).map_err(|e| match e {
        SetupError::UnknownBase(rev) => CliError::Usage(format!(
            "unknown revision `{rev}`; name a branch, tag or commit that exists"
        )),
        other => other.into(),
    })?;
    let mut checker = Checker::new(&repo);
    let verdict = checker.check(base.id, &mut |line| {
        eprintln!("agent-git: {}", crate::text::for_terminal(line))
    });
    let checked = Checked {
        ref_name: rev,
        commit: base.id,
        verdict,
    };
    if args.json {
        println!("{}", crate::check::json(&checked));
    } else {
        print!("{}", crate::text::for_terminal(&describe(&checked)));
    }
    Ok(match checked.verdict {
        Verdict::Passed { .. } => 0,
        Verdict::Failed(_) => 1,
        Verdict::CannotRun(_) => 4,
    })
}

/// The hook: 0 lets the push go on, 1 refuses it. Whatever keeps agent-git from testing is
/// said, and refuses only with agent-git.prePush.strict.
fn pre_push(args: CheckArgs) -> u8 {
    if std::env::var("AGENT_GIT_SKIP").is_ok_and(|v| v == "1") {
        eprintln!("agent-git: AGENT_GIT_SKIP=1: this push is not tested.");
        return 0;
    }
    let repo = match args.repo.open() {
        Ok(repo) => repo,
        Err(e) => return cannot_work(&e.to_string(), None),
    };
    let config = match HookConfig::read(&repo) {
        Ok(config) => config,
        Err(why) => return cannot_work(&why, None),
    };
    if config.mode == HookMode::Off {
        return 0;
    }
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        return cannot_work(&format!("cannot read what git pushes: {e}"), Some(&config));
    }
    let updates = match parse_updates(&input) {
        Ok(updates) => updates,
        Err(why) => return cannot_work(&why, Some(&config)),
    };
    let remote = args.args.first().map_or("", String::as_str);
    let checked = check_updates(&repo, remote, &updates, &config);
    for one in &checked {
        eprint!("{}", crate::text::for_terminal(&describe(one)));
    }
    let decision = decide(&config, &checked);
    conclude(&repo, &checked, &decision)
}

fn cannot_work(why: &str, config: Option<&HookConfig>) -> u8 {
    eprintln!(
        "agent-git: cannot test this push: {}",
        crate::text::for_terminal(why)
    );
    let strict = config.is_some_and(|c| c.strict && c.mode != HookMode::Warn);
    if strict {
        eprintln!("agent-git: push refused (agent-git.prePush.strict is true).");
        return 1;
    }
    eprintln!("agent-git: the push goes on untested.");
    0
}

/// Every commit to test of every pushed ref, tested (each tree once); deleted refs are
/// skipped.
fn check_updates(
    repo: &Repository,
    remote: &str,
    updates: &[RefUpdate],
    config: &HookConfig,
) -> Vec<Checked> {
    let mut checker = Checker::new(repo);
    let mut checked = Vec::new();
    for update in updates.iter().filter(|u| !u.is_deletion()) {
        let commits = match commits_to_test(repo, remote, update, config.which) {
            Ok(commits) => commits,
            Err(e) => {
                checked.push(Checked {
                    ref_name: update.local_ref.clone(),
                    commit: update.local,
                    verdict: Verdict::CannotRun(format!("cannot list the pushed commits: {e}")),
                });
                continue;
            }
        };
        for commit in commits {
            let verdict = checker.check(commit, &mut |line| {
                eprintln!("agent-git: {}", crate::text::for_terminal(line))
            });
            checked.push(Checked {
                ref_name: update.local_ref.clone(),
                commit,
                verdict,
            });
        }
    }
    checked
}

/// Says what happens to the push, starts the fix runs `fix` mode asks for, and returns the
/// hook's exit code.
fn conclude(repo: &Repository, checked: &[Checked], decision: &Decision) -> u8 {
    let (failed, unrun) = (
        crate::check::any_failed(checked),
        crate::check::any_unrun(checked),
    );
    if decision.allow {
        if failed {
            eprintln!(
                "agent-git: the tests fail, but agent-git.prePush is warn: the push goes on."
            );
        } else if unrun {
            eprintln!(
                "agent-git: the push goes on untested where the tests could not run (to refuse \
                 it then: `git config agent-git.prePush.strict true`)."
            );
        }
        return 0;
    }
    if !failed {
        eprintln!(
            "agent-git: push refused: the tests could not be run, and agent-git.prePush.strict \
             is true. Fix what is said above, or push anyway with `git push --no-verify`."
        );
        return 1;
    }
    eprintln!(
        "agent-git: push refused: the tests fail. Fix them and push again, or push anyway with \
         `git push --no-verify` (or AGENT_GIT_SKIP=1 git push)."
    );
    if !decision.fix.is_empty() {
        start_fixes(repo, &decision.fix);
    }
    1
}

/// `fix` mode: one background run per failing commit, if a model is configured.
fn start_fixes(repo: &Repository, commits: &[git2::Oid]) {
    let extra: Vec<String> = std::env::var("AGENT_GIT_HOOK_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect();
    for commit in commits {
        if let Err(why) = model_configured(repo, *commit) {
            eprintln!("agent-git: no fix was started: {why}");
            continue;
        }
        match start_fix(repo, *commit, &extra) {
            Ok(started) => {
                let short = &commit.to_string()[..7];
                let branch = &started.branch;
                eprintln!(
                    "agent-git: agent-git is fixing {short} in the background on branch \
                     {branch} (log: {}).\nagent-git: follow it with `agent-git runs`, \
                     `agent-git show {branch}` or `git log -p {short}..{branch}`; when it \
                     passes, merge it and push again.",
                    started.log.display()
                );
            }
            Err(why) => eprintln!("agent-git: no fix was started: {why}"),
        }
    }
}

/// Whether a fix run would find a model: AGENT_GIT_MODEL, git config or `.agentgit`.
fn model_configured(repo: &Repository, commit: git2::Oid) -> Result<(), String> {
    let env = Layer::from_env()?;
    let settings = crate::prepare::settings_at(repo, commit, env).map_err(|e| e.to_string())?;
    let spec = settings.model.ok_or(
        "agent-git.prePush is fix, but no model is configured; set one with `git config \
         agent-git.model SPEC` (or AGENT_GIT_MODEL)",
    )?;
    ModelSpec::parse(&spec).map(|_| ())
}
