//! The tools a model may call. Each one checks its input and its paths (through the guard)
//! before touching anything; every accepted change becomes a commit through the workspace.

mod ask;
mod edit;
mod files;
mod hooks;
pub mod list;
pub mod search;
mod shell;
mod tests;
mod walk;

use crate::guard::Guard;
use crate::model::ToolSpec;
use crate::sandbox::Sandbox;
use crate::testrun::TestResult;
use crate::verify::{Verifier, VerifyError};
use crate::workspace::{Workspace, WorkspaceError};
use git2::Oid;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::atomic::AtomicBool;

/// Everything a tool may use during one call.
pub struct ToolContext<'a> {
    /// Checks every path the call names before it is read or written.
    pub guard: &'a Guard,
    /// The run's work tree and branch, where every accepted change is committed.
    pub workspace: &'a Workspace,
    /// Where the model's commands (and the repository's commit hooks) run.
    pub sandbox: &'a Sandbox,
    /// Set when the run is interrupted (Ctrl-C, SIGTERM): a running command is stopped.
    pub interrupt: &'a AtomicBool,
    /// The judge of the tests, for run_tests.
    pub verifier: &'a Verifier<'a>,
    /// What the model said alongside the call: the body of the commit the call may make.
    pub note: &'a str,
    /// The longest a run_command may take.
    pub max_command_secs: u64,
    /// Asks the person at the terminal; None when nobody is there to answer.
    pub ask: &'a dyn Fn(&str) -> Option<String>,
    /// Whether agent commits run the repository's commit hooks (not with `--no-verify`).
    pub run_hooks: bool,
}

impl ToolContext<'_> {
    /// The commit hooks an agent commit runs.
    pub fn hooks(&self) -> Box<dyn crate::workspace::CommitHooks + '_> {
        if self.run_hooks {
            Box::new(hooks::SandboxHooks {
                workspace: self.workspace,
                sandbox: self.sandbox,
                interrupt: self.interrupt,
            })
        } else {
            Box::new(crate::workspace::NoHooks)
        }
    }
}

/// What the model is told when a commit hook refused its change.
fn rejected_by_hook(hook: &str, output: &str) -> ToolOutcome {
    ToolOutcome::error(
        format!(
            "refused by the repository's {hook} hook; the change was rolled back. Fix what it \
             reports and make the change again:\n{output}"
        ),
        format!("refused: {hook} hook"),
    )
}

/// The result of a call as the model sees it, and as the report lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    /// The text the model is sent as the call's result.
    pub content: String,
    /// The call failed or was refused; the model is told so (`is_error` in the tool result).
    pub is_error: bool,
    /// A few words for the report's "what was tried": `commit 1a2b3c4`, `refused: protected`.
    pub summary: String,
    /// The commit the call made on the run's branch, if it changed files.
    pub commit: Option<Oid>,
    /// The test run the call made (run_tests), if any.
    pub tests: Option<Box<TestResult>>,
}

impl ToolOutcome {
    /// A call that did what it was asked; no commit, no test run.
    pub fn ok(content: impl Into<String>, summary: impl Into<String>) -> Self {
        ToolOutcome {
            content: content.into(),
            is_error: false,
            summary: summary.into(),
            commit: None,
            tests: None,
        }
    }

    /// A call that failed or was refused: `content` tells the model what to do instead.
    pub fn error(content: impl Into<String>, summary: impl Into<String>) -> Self {
        ToolOutcome {
            is_error: true,
            ..Self::ok(content, summary)
        }
    }
}

/// Errors that end the run: the harness itself failed, not the model's request.
#[derive(Debug, thiserror::Error)]
pub enum ToolFatal {
    /// Committing to or reading the run's branch failed.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// The tests could not be run in the clean room.
    #[error(transparent)]
    Verify(#[from] VerifyError),
}

/// Why a tool stopped short, as codex-rs splits it: an answer for the model (a refusal, input
/// it got wrong, a file that is not there), or the end of the run. `?` makes either.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// Goes back to the model as the call's result; the run goes on.
    #[error("{}", .0.content)]
    Respond(ToolOutcome),
    /// The harness itself failed: the run ends.
    #[error(transparent)]
    Fatal(#[from] ToolFatal),
}

impl From<ToolOutcome> for ToolError {
    fn from(outcome: ToolOutcome) -> Self {
        ToolError::Respond(outcome)
    }
}

impl From<WorkspaceError> for ToolError {
    fn from(e: WorkspaceError) -> Self {
        ToolError::Fatal(e.into())
    }
}

impl From<VerifyError> for ToolError {
    fn from(e: VerifyError) -> Self {
        ToolError::Fatal(e.into())
    }
}

/// One tool the model may call, by the name in its spec.
pub trait Tool: Send + Sync {
    /// The name, description and JSON schema of the input the model is shown.
    fn spec(&self) -> ToolSpec;
    /// How the report names a call, e.g. `edit calc.py`.
    fn label(&self, input: &Value) -> String;
    /// Does the call. `input` is the model's JSON object, not yet checked.
    fn run(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutcome, ToolError>;
}

/// The tools of a run, found by name.
pub struct Registry {
    tools: Vec<Box<dyn Tool>>,
    /// The tools' names, in order: read once, since a spec builds its whole JSON schema.
    names: Vec<&'static str>,
}

impl Registry {
    /// Every built-in tool, in the order the model is shown them.
    pub fn builtin() -> Self {
        Self::new(vec![
            Box::new(list::ListFiles::default()),
            Box::new(files::ReadFile),
            Box::new(search::Search),
            Box::new(edit::WriteFile),
            Box::new(edit::EditFile),
            Box::new(edit::DeleteFile),
            Box::new(tests::RunTests),
            Box::new(shell::RunCommand),
            Box::new(ask::AskUser),
        ])
    }

    fn new(tools: Vec<Box<dyn Tool>>) -> Self {
        let names = tools.iter().map(|t| t.spec().name).collect();
        Registry { tools, names }
    }

    /// What the model is told of each tool, in order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec()).collect()
    }

    fn find(&self, name: &str) -> Option<&dyn Tool> {
        let index = self.names.iter().position(|n| *n == name)?;
        Some(self.tools[index].as_ref())
    }

    /// How the report names a call; an unknown tool's name as it came.
    pub fn label(&self, name: &str, input: &Value) -> String {
        match self.find(name) {
            Some(tool) => tool.label(input),
            None => name.to_string(),
        }
    }

    /// Runs one call. Anything the model sent wrong comes back as an is_error outcome.
    pub fn call(
        &self,
        name: &str,
        input: &Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutcome, ToolFatal> {
        match self.find(name) {
            // Arguments that were not JSON arrive as the raw text (see the OpenAI adapter).
            Some(_) if !input.is_object() => Ok(ToolOutcome::error(
                not_an_object(name, input),
                "refused: invalid input",
            )),
            Some(tool) => match tool.run(input, ctx) {
                Ok(outcome) | Err(ToolError::Respond(outcome)) => Ok(outcome),
                Err(ToolError::Fatal(fatal)) => Err(fatal),
            },
            None => Ok(ToolOutcome::error(
                format!(
                    "unknown tool `{name}`; the tools are: {}",
                    self.names.join(", ")
                ),
                "refused: unknown tool",
            )),
        }
    }
}

/// What the model is told of arguments that are not one JSON object: the parse error, when
/// they were not JSON at all, with the start of what it sent.
fn not_an_object(name: &str, input: &Value) -> String {
    let Value::String(raw) = input else {
        return format!(
            "invalid input for {name}: the arguments must be a JSON object, got: {input}"
        );
    };
    let start: String = raw.chars().take(300).collect();
    match serde_json::from_str::<Value>(raw) {
        Err(e) => format!(
            "invalid input for {name}: the arguments are not valid JSON ({e}); send the call \
             again with one JSON object. They began: {start}"
        ),
        Ok(_) => {
            format!("invalid input for {name}: the arguments must be a JSON object, got: {start}")
        }
    }
}

/// Reads a tool's input into its typed form, or says what was wrong with it.
fn parse_input<T: DeserializeOwned>(tool: &str, input: &Value) -> Result<T, ToolOutcome> {
    serde_json::from_value(input.clone()).map_err(|e| {
        ToolOutcome::error(
            format!("invalid input for {tool}: {e}; see the tool's input schema"),
            "refused: invalid input",
        )
    })
}

/// `verb path` for the report, from the input's `path` when it has one.
fn path_label(verb: &str, input: &Value) -> String {
    match input.get("path").and_then(Value::as_str) {
        Some(path) => format!("{verb} {path}"),
        None => verb.to_string(),
    }
}

/// What the model is told of files a commit left out.
fn dropped_lines(dropped: &[crate::workspace::Dropped]) -> Vec<String> {
    dropped
        .iter()
        .map(|d| {
            format!(
                "refused: {} was not committed: {}; it was undone in the work tree",
                d.path, d.why
            )
        })
        .collect()
}

/// What the model is told when a change touched protected paths.
fn refused_protected(paths: &[String]) -> String {
    format!(
        "refused: the change touched protected test files or test configuration ({}); it was \
         rolled back. Change the code under test instead",
        paths.join(", ")
    )
}

fn short(oid: Oid) -> String {
    oid.to_string()[..7].to_string()
}
