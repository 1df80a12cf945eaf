//! The pre-push check: which commits a push brings, their tests run in a clean room (or found
//! passed before, by tree), and whether the push may go on. Nothing here touches the user's
//! checkout or the pushed refs; a fix is started in the background, never waited for.

mod background;
mod dry;
pub mod install;
mod tester;

pub use background::{start_fix, StartedFix};
pub use dry::{describe_dry_run, DryRun, DryVerdict};
pub use tester::{identity, Checker};

use crate::testrun::TestResult;
use git2::{Oid, Repository};

/// What the hook does, by git config `agent-git.prePush`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookMode {
    /// Test nothing; every push goes on.
    Off,
    /// Say what fails; push anyway.
    Warn,
    /// Refuse a push whose tests fail.
    Block,
    /// Refuse, and start `agent-git fix` on the failing commit in the background.
    Fix,
}

/// Which commits of a pushed ref are tested, by `agent-git.prePush.commits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// The commit each ref is pushed to.
    Tips,
    /// Every commit the remote does not have yet.
    All,
}

/// How the pre-push hook behaves, from git config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HookConfig {
    /// What a failing push leads to.
    pub mode: HookMode,
    /// Which commits are tested.
    pub which: Which,
    /// Refuse (in `block` and `fix` mode) also when the tests could not be run.
    pub strict: bool,
}

/// Refusing a push whose tests fail is what a test hook is installed for; `fix` needs a model
/// and spends money, so it is asked for by name.
pub const DEFAULT_MODE: HookMode = HookMode::Block;

impl HookConfig {
    /// Reads `agent-git.prePush`, `agent-git.prePush.commits`, `agent-git.prePush.strict`.
    pub fn read(repo: &Repository) -> Result<Self, String> {
        let config = repo
            .config()
            .map_err(|e| format!("cannot read git config: {e}"))?;
        let text = |key: &str| config.get_string(key).ok();
        let strict = match config.get_bool("agent-git.prePush.strict") {
            Ok(value) => Some(value),
            Err(e) if e.code() == git2::ErrorCode::NotFound => None,
            Err(_) => {
                return Err(
                    "agent-git.prePush.strict must be true or false; fix it with \
                            `git config agent-git.prePush.strict true`"
                        .to_string(),
                )
            }
        };
        Self::parse(
            text("agent-git.prePush").as_deref(),
            text("agent-git.prePush.commits").as_deref(),
            strict,
        )
    }

    /// The config from the values of those keys (None: unset), case and blanks ignored. Errs
    /// on an unknown value, saying which values there are.
    pub fn parse(
        mode: Option<&str>,
        commits: Option<&str>,
        strict: Option<bool>,
    ) -> Result<Self, String> {
        let mode = match mode.map(|m| m.trim().to_ascii_lowercase()).as_deref() {
            None => DEFAULT_MODE,
            Some("off") => HookMode::Off,
            Some("warn") => HookMode::Warn,
            Some("block") => HookMode::Block,
            Some("fix") => HookMode::Fix,
            Some(other) => {
                return Err(format!(
                    "agent-git.prePush is `{other}`; use off, warn, block or fix \
                     (`git config agent-git.prePush block`)"
                ))
            }
        };
        let which = match commits.map(|c| c.trim().to_ascii_lowercase()).as_deref() {
            None | Some("tip") | Some("tips") => Which::Tips,
            Some("all") => Which::All,
            Some(other) => {
                return Err(format!(
                    "agent-git.prePush.commits is `{other}`; use tip or all \
                     (`git config agent-git.prePush.commits all`)"
                ))
            }
        };
        Ok(HookConfig {
            mode,
            which,
            strict: strict.unwrap_or(false),
        })
    }
}

/// One line of git's pre-push input: `<local ref> <local sha> <remote ref> <remote sha>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefUpdate {
    /// The ref pushed from (`refs/heads/main`); `(delete)` for a deletion.
    pub local_ref: String,
    /// The commit pushed; zero for a deletion.
    pub local: Oid,
    /// The ref pushed to.
    pub remote_ref: String,
    /// The commit the remote has there; zero for a new ref.
    pub remote: Oid,
}

impl RefUpdate {
    /// A deleted ref has nothing to test.
    pub fn is_deletion(&self) -> bool {
        self.local.is_zero()
    }
}

/// Reads git's pre-push input; blank lines are skipped.
pub fn parse_updates(input: &str) -> Result<Vec<RefUpdate>, String> {
    let mut updates = Vec::new();
    for line in input.lines().filter(|l| !l.trim().is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let bad = || {
            format!(
                "cannot read the pre-push line `{line}`; git gives `<local ref> <local sha> \
                 <remote ref> <remote sha>` on stdin (run agent-git check --pre-push from a \
                 pre-push hook)"
            )
        };
        let [local_ref, local, remote_ref, remote] = words[..] else {
            return Err(bad());
        };
        updates.push(RefUpdate {
            local_ref: local_ref.to_string(),
            local: Oid::from_str(local).map_err(|_| bad())?,
            remote_ref: remote_ref.to_string(),
            remote: Oid::from_str(remote).map_err(|_| bad())?,
        });
    }
    Ok(updates)
}

/// The commits to test for one pushed ref, newest first: its tip, or with `Which::All` every
/// commit reachable from it that neither the remote's old value nor the remote-tracking refs
/// of `remote` reach. A tag of something that is no commit has none.
pub fn commits_to_test(
    repo: &Repository,
    remote: &str,
    update: &RefUpdate,
    which: Which,
) -> Result<Vec<Oid>, git2::Error> {
    let Ok(tip) = repo.find_object(update.local, None)?.peel_to_commit() else {
        return Ok(Vec::new());
    };
    if which == Which::Tips {
        return Ok(vec![tip.id()]);
    }
    let mut walk = repo.revwalk()?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL)?;
    walk.push(tip.id())?;
    // The remote's old value may be unknown here (someone else pushed it): then only the
    // remote-tracking refs tell what the remote has.
    if let Ok(known) = repo.find_object(update.remote, None) {
        if let Ok(commit) = known.peel_to_commit() {
            walk.hide(commit.id())?;
        }
    }
    let tracking = format!("refs/remotes/{remote}/*");
    for reference in repo.references_glob(&tracking)?.flatten() {
        if let Ok(commit) = reference.peel_to_commit() {
            walk.hide(commit.id())?;
        }
    }
    walk.collect()
}

/// What the test of one commit came to.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// `cached`: found passed before, by its tree and test set-up; nothing ran.
    Passed {
        /// The test counts in words (`12 passed`).
        summary: String,
        /// Whether the pass was found in the record of passes rather than run now.
        cached: bool,
    },
    /// The tests ran and did not pass.
    Failed(Box<TestResult>),
    /// The tests could not be run, or agent-git could not work; says why and how to fix it.
    CannotRun(String),
}

/// One tested commit of a push.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The pushed ref the commit belongs to.
    pub ref_name: String,
    /// The commit tested.
    pub commit: Oid,
    /// What its test came to.
    pub verdict: Verdict,
}

/// Whether the push goes on, and the commits to start a fix on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The hook exits 0 and the push goes on.
    pub allow: bool,
    /// The failing commits to start `agent-git fix` on (`fix` mode only).
    pub fix: Vec<Oid>,
}

/// Whether the tests of some commit ran and failed.
pub fn any_failed(checked: &[Checked]) -> bool {
    checked
        .iter()
        .any(|c| matches!(c.verdict, Verdict::Failed(_)))
}

/// Whether the tests of some commit could not run.
pub fn any_unrun(checked: &[Checked]) -> bool {
    checked
        .iter()
        .any(|c| matches!(c.verdict, Verdict::CannotRun(_)))
}

/// Only tests that ran and failed refuse a push (in `block` and `fix` mode); tests that could
/// not run refuse it only with `strict`. In `fix` mode each ref gets one run, on its newest
/// failing commit.
pub fn decide(config: &HookConfig, checked: &[Checked]) -> Decision {
    let (failed, unrun) = (any_failed(checked), any_unrun(checked));
    let refusing = matches!(config.mode, HookMode::Block | HookMode::Fix);
    let allow = !(refusing && (failed || (unrun && config.strict)));
    let mut fix: Vec<Oid> = Vec::new();
    if config.mode == HookMode::Fix {
        let mut refs_done: Vec<&str> = Vec::new();
        for c in checked {
            let fails = matches!(c.verdict, Verdict::Failed(_));
            if fails && !refs_done.contains(&c.ref_name.as_str()) {
                refs_done.push(&c.ref_name);
                if !fix.contains(&c.commit) {
                    fix.push(c.commit);
                }
            }
        }
    }
    Decision { allow, fix }
}

/// What a check says of one commit, for the terminal.
/// What `agent-git check --json` prints of a tested commit, named as `fix --json` names the
/// same things: `outcome` (`passed`, `failed`, `tests-cannot-run`), `reason`, and `tests`
/// (`command`, `passed`, `summary`, `failing`, `cached`) where the tests ran or were found
/// passed before.
pub fn json(checked: &Checked) -> serde_json::Value {
    use serde_json::json;
    let (outcome, reason, tests) = match &checked.verdict {
        Verdict::Passed { summary, cached } => (
            "passed",
            None,
            json!({"passed": true, "summary": summary, "failing": [], "cached": cached}),
        ),
        Verdict::Failed(result) => (
            "failed",
            None,
            json!({
                "command": result.command,
                "passed": false,
                "summary": result.summary(),
                "failing": result.failing.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
                "cached": false,
            }),
        ),
        Verdict::CannotRun(why) => ("tests-cannot-run", Some(why.as_str()), json!(null)),
    };
    json!({
        "commit": checked.commit.to_string(),
        "ref": checked.ref_name,
        "outcome": outcome,
        "reason": reason,
        "tests": tests,
    })
}

/// What the hook prints of one tested commit: its short id and ref, the verdict, and each
/// failing test with why.
pub fn describe(checked: &Checked) -> String {
    let short = &checked.commit.to_string()[..7];
    let at = format!("agent-git: {short} ({})", short_ref(&checked.ref_name));
    match &checked.verdict {
        Verdict::Passed { summary, cached } if *cached => {
            format!("{at}: tests pass ({summary}; this tree passed before, nothing ran)\n")
        }
        Verdict::Passed { summary, .. } => format!("{at}: tests pass ({summary})\n"),
        Verdict::CannotRun(why) => format!("{at}: the tests could not be run: {why}\n"),
        Verdict::Failed(result) => {
            let mut text = format!(
                "{at}: the tests fail ({}) with `{}`\n",
                result.summary(),
                result.command
            );
            for failure in &result.failing {
                match &failure.detail {
                    Some(detail) => text.push_str(&format!("  - {}: {detail}\n", failure.name)),
                    None => text.push_str(&format!("  - {}\n", failure.name)),
                }
            }
            if !result.tail.is_empty() {
                for line in result.tail.lines() {
                    text.push_str(&format!("  | {line}\n"));
                }
            }
            text
        }
    }
}

/// `main` for `refs/heads/main`, `v1` for `refs/tags/v1`.
fn short_ref(name: &str) -> &str {
    name.strip_prefix("refs/heads/")
        .or_else(|| name.strip_prefix("refs/tags/"))
        .unwrap_or(name)
}

#[cfg(test)]
mod tests;
