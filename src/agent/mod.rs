//! The loop: ask the model, run its tools, verify when it says it is done, stop at the budget.

mod context;
mod prompt;

pub use prompt::SYSTEM_PROMPT;

use crate::model::{
    ContentBlock, Message, Model, ModelError, Price, Reply, Request, Role, StopReason, ToolSpec,
    Usage,
};
use crate::testrun::TestResult;
use crate::tools::{Registry, ToolContext, ToolFatal};
use crate::verify::{describe_for_model, Verifier};
use git2::Oid;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How a run ended. The names are public: they appear in reports, trailers and `--json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The final test run, in the clean room, passed every test of the inventory.
    Passed,
    /// The tests passed before any change and the run was asked to stop then (`--if-failing`).
    AlreadyPassing,
    /// The turn budget (`--max-turns`) was spent with tests still failing.
    TurnLimit,
    /// The cost budget (`--max-cost`) was spent with tests still failing.
    CostLimit,
    /// The run's time (`--max-time`) was spent.
    TimeLimit,
    /// The same tool call kept giving the same result.
    Stuck,
    /// The model's API failed (after the retries it allows); the text is the error.
    ModelError(String),
    /// The model declined the task.
    Refused(String),
    /// Ctrl-C or SIGTERM stopped the run.
    Interrupted,
    /// The harness itself failed (git, the test command could not start): not the model's doing.
    HarnessError(String),
    /// The test command cannot run at all before any change; the model was never called.
    TestsCannotRun(String),
}

impl Outcome {
    /// The outcome's public name (`passed`, `turn-limit`), as reports and `--json` spell it.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::AlreadyPassing => "already-passing",
            Outcome::TurnLimit => "turn-limit",
            Outcome::CostLimit => "cost-limit",
            Outcome::TimeLimit => "time-limit",
            Outcome::Stuck => "stuck",
            Outcome::ModelError(_) => "model-error",
            Outcome::Refused(_) => "refused",
            Outcome::Interrupted => "interrupted",
            Outcome::HarnessError(_) => "harness-error",
            Outcome::TestsCannotRun(_) => "tests-cannot-run",
        }
    }

    /// The documented exit codes: 0 pass, 1 tests still fail at a budget, 3 model error or
    /// refusal, 4 harness error or tests that cannot run, 130 interrupted.
    pub fn exit_code(&self) -> u8 {
        match self {
            Outcome::Passed | Outcome::AlreadyPassing => 0,
            Outcome::TurnLimit | Outcome::CostLimit | Outcome::TimeLimit | Outcome::Stuck => 1,
            Outcome::ModelError(_) | Outcome::Refused(_) => 3,
            Outcome::HarnessError(_) | Outcome::TestsCannotRun(_) => 4,
            Outcome::Interrupted => 130,
        }
    }

    /// The words that say why, for the outcomes that carry them (`--json`'s `reason`).
    pub fn reason(&self) -> Option<&str> {
        match self {
            Outcome::ModelError(why)
            | Outcome::Refused(why)
            | Outcome::HarnessError(why)
            | Outcome::TestsCannotRun(why) => Some(why),
            _ => None,
        }
    }

    /// Whether the run's branch stays: not when nothing was asked of the model.
    pub fn keeps_branch(&self) -> bool {
        !matches!(self, Outcome::AlreadyPassing | Outcome::TestsCannotRun(_))
    }

    /// Why a run stopped before its tests passed, said beside a `passed` whose final test run
    /// passed anyway (None for the stops that end a run without a final test run).
    fn early_stop(&self) -> Option<String> {
        match self {
            Outcome::TurnLimit => Some("the turn budget was spent".into()),
            Outcome::CostLimit => Some("the cost budget was spent".into()),
            Outcome::TimeLimit => Some("the time budget was spent".into()),
            Outcome::Stuck => Some("the model repeated itself".into()),
            Outcome::ModelError(e) => Some(format!("the model failed: {e}")),
            Outcome::Refused(_) => Some("the model refused to go on".into()),
            _ => None,
        }
    }
}

/// One line of the report's "what was tried".
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Action {
    /// The model call (counted from 1) the action belongs to.
    pub turn: u32,
    /// The tool call as the report names it (`edit calc.py`), or a step of the harness.
    pub label: String,
    /// A few words on how it went (`commit 1a2b3c4`, `refused: protected`).
    pub result: String,
}

/// What a run may spend before it stops, and reports so.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Model calls.
    pub max_turns: u32,
    /// The longest one run_command may take.
    pub max_command_secs: u64,
    /// Dollars; needs a price to mean anything.
    pub max_cost: Option<f64>,
    /// What the model's tokens cost; None when not known, and then no cost is stated.
    pub price: Option<Price>,
    /// Tokens; when a request nears it, old tool results are dropped.
    pub context_window: Option<u64>,
    /// The run's time, and when it is up: no model call starts after it, one under way is
    /// cut at it, and no command may run past it.
    pub max_time: Option<Duration>,
    /// `max_time` after the run started.
    pub deadline: Option<std::time::Instant>,
}

impl Budget {
    /// Dollars for `usage`; None without a price.
    pub fn cost(&self, usage: &Usage) -> Option<f64> {
        self.price.map(|p| p.cost(usage))
    }
}

/// What the loop leaves for the report.
pub struct RunResult {
    /// How the run ended.
    pub outcome: Outcome,
    /// Model calls made.
    pub turns: u32,
    /// What was tried, in order.
    pub actions: Vec<Action>,
    /// The commits made on the branch, oldest first.
    pub commits: Vec<Oid>,
    /// The last test result: the one the report states.
    pub tests: TestResult,
    /// The whole conversation, for the transcript and a later `--resume`.
    pub messages: Vec<Message>,
    /// Tokens over all model calls.
    pub usage: Usage,
    /// For a `passed` run whose conversation ended otherwise (a budget, a model error): how it
    /// ended. The final test run passed with every test of the inventory.
    pub ended_early: Option<String>,
    /// Time spent waiting for the model. What neither it nor `process_time` counts of a run's
    /// time is the harness's own.
    pub model_time: Duration,
    /// Time spent in confined processes (tests, commands, hooks).
    pub process_time: Duration,
    /// Which of a passed run's changes its tests require.
    pub proof: crate::verify::Proof,
    /// How each layer of the run's sandbox held, in full (`--json`; the report has it short).
    pub sandbox_details: Option<String>,
}

impl RunResult {
    /// A run that ended before the model was asked anything.
    pub fn before_the_model(outcome: Outcome, tests: TestResult) -> Self {
        RunResult {
            outcome,
            turns: 0,
            actions: Vec::new(),
            commits: Vec::new(),
            tests,
            messages: Vec::new(),
            usage: Usage::default(),
            ended_early: None,
            model_time: Duration::ZERO,
            process_time: Duration::ZERO,
            proof: crate::verify::Proof::NotRun,
            sandbox_details: None,
        }
    }
}

/// One run's loop and what it works with.
pub struct Agent<'a> {
    /// The model asked for each turn.
    pub model: &'a mut dyn Model,
    /// The tools the model may call.
    pub registry: &'a Registry,
    /// Checks the paths the tools are given.
    pub guard: &'a crate::guard::Guard,
    /// Runs the tests when the model ends its turn (and for run_tests); its word alone is a pass.
    pub verifier: &'a Verifier<'a>,
    /// The system prompt.
    pub system: &'a str,
    /// What the first message holds besides the task and the first test result.
    pub brief: &'a crate::brief::Brief,
    /// Asks the person who started the run (ask_user); None when nobody is there.
    pub ask: &'a dyn Fn(&str) -> Option<String>,
    /// Called as the model is first asked: what waited for that (the look at the user's
    /// checkout) goes on.
    pub asking: &'a dyn Fn(),
    /// Agent commits run the repository's commit hooks.
    pub run_hooks: bool,
    /// Checked before every model call.
    pub budget: Budget,
    /// Set by Ctrl-C or SIGTERM: the run ends `interrupted`, a model call under way cut off.
    pub interrupt: &'a AtomicBool,
    /// Progress lines (one per tool call) go here; the CLI sends them to stderr.
    pub progress: &'a mut dyn FnMut(&str),
    /// The same steps as JSON events (a turn, a tool call, a test run, a commit), as they
    /// happen (`fix --json-events`).
    pub events: &'a mut dyn FnMut(&serde_json::Value),
    /// End the run before the first model call when the tests already pass.
    pub only_if_failing: bool,
    /// The conversation of an earlier attempt on the same branch, to go on from.
    pub resume: Option<Vec<Message>>,
}

struct Loop {
    turns: u32,
    actions: Vec<Action>,
    commits: Vec<Oid>,
    messages: Vec<Message>,
    tests: TestResult,
    /// The branch head the last test result was taken at.
    tested_at: Option<Oid>,
    usage: Usage,
    /// Tokens of the last request and its reply: how full the context window is.
    context_used: u64,
    /// The size in bytes of the conversation when it was last sent: what came after is new.
    sent_bytes: usize,
    /// The bytes every request holds besides the conversation: the system prompt and tools.
    fixed_bytes: usize,
    /// The last tool call with its result, and how many times in a row it came back.
    last_call: Option<String>,
    repeats: u32,
    model_time: Duration,
}

impl Agent<'_> {
    /// Runs the whole conversation; every way it can end is an outcome the report states.
    pub async fn run(mut self, task: &str, tools: &[ToolSpec]) -> RunResult {
        let initial = match self.verifier.baseline() {
            Ok(tests) => tests,
            Err(e) => {
                let why = e.to_string();
                let tests = TestResult::not_run(&self.verifier.plan.label, &why);
                return RunResult::before_the_model(Outcome::HarnessError(why), tests);
            }
        };
        self.test_event_at(0, &initial);
        (self.progress)(&format!(
            "tests before any change: {}{}",
            initial.summary(),
            match self.verifier.inventory_size() {
                0 => " (no test names could be read: the exit code decides)".to_string(),
                n => format!(" ({n} tests in the inventory)"),
            }
        ));
        if let Some(why) = self.verifier.cannot_run(&initial) {
            (self.progress)(&format!(
                "the tests cannot run, so no model is called: {why}"
            ));
            return RunResult::before_the_model(Outcome::TestsCannotRun(why), initial);
        }
        if self.only_if_failing && initial.passed {
            return RunResult::before_the_model(Outcome::AlreadyPassing, initial);
        }
        let (messages, tests) = match self.resume.take() {
            None => {
                let first = first_message(task, self.brief, &initial);
                (
                    vec![Message::user(vec![ContentBlock::text(first)])],
                    initial,
                )
            }
            Some(prior) => match self.verifier.run() {
                Ok(now) => {
                    (self.progress)(&format!(
                        "resumed; the branch's tests now: {}",
                        now.summary()
                    ));
                    (resumed(prior, &now), now)
                }
                Err(e) => {
                    let why = e.to_string();
                    let tests = TestResult::not_run(&self.verifier.plan.label, &why);
                    return RunResult::before_the_model(Outcome::HarnessError(why), tests);
                }
            },
        };
        let mut state = Loop {
            turns: 0,
            actions: Vec::new(),
            commits: Vec::new(),
            messages,
            tested_at: self.verifier.workspace.head().ok(),
            tests,
            usage: Usage::default(),
            context_used: 0,
            sent_bytes: 0,
            fixed_bytes: self.system.len() + serde_json::to_string(tools).map_or(0, |t| t.len()),
            last_call: None,
            repeats: 0,
            model_time: Duration::ZERO,
        };
        let stopped = self.converse(&mut state, tools).await;
        let outcome = self.final_check(&mut state, stopped.clone());
        let ended_early = (outcome == Outcome::Passed)
            .then(|| stopped.early_stop())
            .flatten();
        RunResult {
            outcome,
            turns: state.turns,
            actions: state.actions,
            commits: state.commits,
            tests: state.tests,
            messages: state.messages,
            usage: state.usage,
            ended_early,
            model_time: state.model_time,
            process_time: Duration::ZERO,
            proof: crate::verify::Proof::NotRun,
            sandbox_details: None,
        }
    }

    async fn converse(&mut self, state: &mut Loop, tools: &[ToolSpec]) -> Outcome {
        loop {
            if self.interrupt.load(Ordering::SeqCst) {
                return Outcome::Interrupted;
            }
            if state.turns >= self.budget.max_turns {
                return Outcome::TurnLimit;
            }
            if self.time_left() == Some(Duration::ZERO) {
                return Outcome::TimeLimit;
            }
            if let (Some(max), Some(cost)) = (self.budget.max_cost, self.budget.cost(&state.usage))
            {
                if cost >= max {
                    return Outcome::CostLimit;
                }
            }
            if let Some(window) = self.budget.context_window {
                if estimate(state).saturating_mul(4) >= window.saturating_mul(3) {
                    self.shrink(state);
                }
            }
            let asked = match self.budget.deadline {
                Some(deadline) => tokio::select! {
                    reply = self.ask(state, tools) => Some(reply),
                    _ = tokio::time::sleep_until(deadline.into()) => None,
                },
                None => Some(self.ask(state, tools).await),
            };
            let Some(asked) = asked else {
                self.record(state, "model call cut off", "the time budget was spent");
                return Outcome::TimeLimit;
            };
            let reply = match asked {
                Ok(reply) => reply,
                Err(ModelError::Interrupted) => return Outcome::Interrupted,
                Err(ModelError::ContextOverflow { message, window }) => {
                    // Not the model's failure: the conversation outgrew the window. It shrinks
                    // and goes again; a window the server named is kept to for the rest.
                    if let Some(window) = window {
                        let known = self.budget.context_window.unwrap_or(window);
                        self.budget.context_window = Some(known.min(window));
                    }
                    self.record(state, "prompt too long", &message);
                    if self.shrink(state) == 0 {
                        return Outcome::ModelError(format!(
                            "the conversation no longer fits the model's context window \
                             ({message}); if the reply's --max-tokens is much of the window, \
                             lower it"
                        ));
                    }
                    continue;
                }
                Err(e) => return Outcome::ModelError(e.to_string()),
            };
            state.sent_bytes = conversation_bytes(&state.messages);
            state.turns += 1;
            state.usage.add(&reply.usage);
            (self.events)(&serde_json::json!({
                "type": "turn", "turn": state.turns, "stop_reason": reply.stop_reason,
                "usage": reply.usage,
            }));
            state.context_used = reply.usage.all_input() + reply.usage.output_tokens;
            if reply.stop_reason == StopReason::ModelContextWindowExceeded {
                // The reply is cut short and unusable: drop it, shrink, ask again.
                if self.shrink(state) == 0 {
                    return Outcome::ModelError(
                        "the conversation no longer fits the model's context window".into(),
                    );
                }
                continue;
            }
            state.messages.push(Message {
                role: Role::Assistant,
                content: reply.content.clone(),
            });
            match self.answer(state, &reply) {
                Ok(Some(outcome)) => return outcome,
                Ok(None) => {}
                Err(fatal) => return Outcome::HarnessError(fatal.to_string()),
            }
        }
    }

    /// What is left of the run's time, if it has a limit.
    fn time_left(&self) -> Option<Duration> {
        self.budget
            .deadline
            .map(|deadline| deadline.saturating_duration_since(std::time::Instant::now()))
    }

    async fn ask(&mut self, state: &mut Loop, tools: &[ToolSpec]) -> Result<Reply, ModelError> {
        (self.asking)();
        let request = Request {
            system: self.system,
            messages: &state.messages,
            tools,
        };
        let interrupt = self.interrupt;
        let started = std::time::Instant::now();
        let reply = tokio::select! {
            reply = self.model.reply(&request) => reply,
            _ = wait_for(interrupt) => Err(ModelError::Interrupted),
        };
        state.model_time += started.elapsed();
        reply
    }

    /// Acts on one reply: runs its tool calls, or verifies when the model ends its turn.
    /// Returns the outcome when the run is over.
    fn answer(&mut self, state: &mut Loop, reply: &Reply) -> Result<Option<Outcome>, ToolFatal> {
        let calls: Vec<(&String, &String, &serde_json::Value)> = reply
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolUse { id, name, input } => Some((id, name, input)),
                _ => None,
            })
            .collect();
        if reply.stop_reason == StopReason::Refusal {
            // A refused turn may hold calls it was writing: none of them runs.
            self.record(state, "model refused", "run stopped");
            return Ok(Some(Outcome::Refused(reply.text())));
        }
        if !calls.is_empty() && reply.stop_reason == StopReason::MaxTokens {
            // A call written when the reply was cut off may be cut too (a file's content half
            // written): none of them runs, each is answered so, and the model asked again.
            self.record(
                state,
                "reply cut off (max_tokens)",
                "its tool calls did not run",
            );
            let results = calls
                .into_iter()
                .map(|(id, name, _)| ContentBlock::ToolResult {
                    tool_use_id: id.clone(),
                    content: format!(
                        "not run: your reply was cut off at the token limit while it held this \
                         {name} call, so its input may be incomplete. Send it again, smaller \
                         (split a large file into several edits)."
                    ),
                    is_error: true,
                })
                .collect();
            state.messages.push(Message::user(results));
            return Ok(None);
        }
        if !calls.is_empty() {
            let note = reply.text();
            let mut results = Vec::new();
            for (id, name, input) in calls {
                results.push(self.call_tool(state, &note, id, name, input)?);
            }
            state.messages.push(Message::user(results));
            if state.repeats >= STUCK_AFTER {
                return Ok(Some(Outcome::Stuck));
            }
            return Ok(None);
        }
        match reply.stop_reason {
            StopReason::MaxTokens => {
                self.record(state, "reply cut off (max_tokens)", "asked to continue");
                state
                    .messages
                    .push(Message::user(vec![ContentBlock::text(CUT_OFF)]));
                return Ok(None);
            }
            // The API paused a long turn: sending the conversation back lets it go on.
            StopReason::PauseTurn => {
                self.record(state, "turn paused (pause_turn)", "continued");
                return Ok(None);
            }
            _ => {}
        }
        let tests = self.verify(state)?;
        self.record(state, "end of turn: tests", &tests.summary());
        if tests.passed {
            return Ok(Some(Outcome::Passed));
        }
        let feedback = format!(
            "You ended your turn, so the harness ran the tests. They still fail.\n{}\n\n\
             The task is done only when the tests pass. Keep working.",
            describe_for_model(&tests)
        );
        state
            .messages
            .push(Message::user(vec![ContentBlock::text(feedback)]));
        Ok(None)
    }

    fn call_tool(
        &mut self,
        state: &mut Loop,
        note: &str,
        id: &str,
        name: &str,
        input: &serde_json::Value,
    ) -> Result<ContentBlock, ToolFatal> {
        // The work tree may still be being made ready: no tool sees it before it is.
        self.verifier.workspace.ready()?;
        let ctx = ToolContext {
            guard: self.guard,
            workspace: self.verifier.workspace,
            sandbox: self.verifier.sandbox,
            interrupt: self.verifier.interrupt,
            verifier: self.verifier,
            note,
            max_command_secs: match self.time_left() {
                // The whole second the time left ends in: cut short of the deadline, a command
                // would leave the run a model call it has no time for. At least a second: a
                // call made with no time left is refused by the loop.
                Some(left) => self
                    .budget
                    .max_command_secs
                    .min((left.as_secs_f64().ceil() as u64).max(1)),
                None => self.budget.max_command_secs,
            },
            ask: self.ask,
            run_hooks: self.run_hooks,
        };
        let mut outcome = self.registry.call(name, input, &ctx)?;
        let key = format!("{name}\n{input}\n{}\n{}", outcome.is_error, outcome.content);
        if state.last_call.as_ref() == Some(&key) {
            state.repeats += 1;
        } else {
            state.last_call = Some(key);
            state.repeats = 1;
        }
        if state.repeats == WARN_AFTER {
            outcome.content.push_str(&format!(
                "\n[harness: this is the same call with the same result {WARN_AFTER} times in a \
                 row; try something different. At {STUCK_AFTER} the run stops.]"
            ));
        }
        let label = self.registry.label(name, input);
        self.record(state, &label, &outcome.summary);
        (self.events)(&serde_json::json!({
            "type": "tool_call", "turn": state.turns, "tool": name, "label": label,
            "result": outcome.summary, "is_error": outcome.is_error,
            "commit": outcome.commit.map(|c| c.to_string()),
        }));
        if let Some(oid) = outcome.commit {
            state.commits.push(oid);
            (self.events)(&serde_json::json!({
                "type": "commit", "turn": state.turns, "commit": oid.to_string(),
            }));
        }
        if let Some(tests) = &outcome.tests {
            self.test_event(state, tests);
        }
        if let Some(tests) = outcome.tests {
            state.tested_at = self.verifier.workspace.head().ok();
            state.tests = *tests;
        }
        Ok(ContentBlock::ToolResult {
            tool_use_id: id.to_string(),
            content: outcome.content,
            is_error: outcome.is_error,
        })
    }

    fn verify(&mut self, state: &mut Loop) -> Result<TestResult, ToolFatal> {
        let tests = self.verifier.run()?;
        self.test_event(state, &tests);
        state.tested_at = self.verifier.workspace.head().ok();
        state.tests = tests.clone();
        Ok(tests)
    }

    /// Drops old tool results to make room, or when there are none, cuts the long ones
    /// that remain; returns how many were dropped or cut.
    fn shrink(&mut self, state: &mut Loop) -> usize {
        let removed = context::compact(&mut state.messages);
        let (removed, what) = match removed {
            0 => (
                context::cut_long(&mut state.messages),
                "long tool results cut",
            ),
            n => (n, "old tool results dropped"),
        };
        // What the conversation holds now is unknown to the API: estimate it from its size.
        state.context_used = 0;
        state.sent_bytes = 0;
        if removed > 0 {
            self.record(state, "context nearly full", &format!("{removed} {what}"));
        }
        removed
    }

    /// A test run the harness states, as an event.
    fn test_event(&mut self, state: &Loop, tests: &TestResult) {
        self.test_event_at(state.turns, tests);
    }

    fn test_event_at(&mut self, turn: u32, tests: &TestResult) {
        (self.events)(&serde_json::json!({
            "type": "test_run", "turn": turn, "passed": tests.passed,
            "summary": tests.summary(),
            "failing": tests.failing.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
            "cached": tests.cached,
        }));
    }

    fn record(&mut self, state: &mut Loop, label: &str, result: &str) {
        (self.progress)(&format!("turn {}: {label} -> {result}", state.turns));
        state.actions.push(Action {
            turn: state.turns,
            label: label.to_string(),
            result: result.to_string(),
        });
    }

    /// The report must state the tests of the branch as it ends: run them once more unless
    /// the last result already belongs to this commit. One rule for every way a conversation
    /// stops short (a budget, a model error or refusal): if that final clean-room run passes
    /// with the whole inventory, the run passed. An interrupt or a harness error ends the run
    /// as it is.
    fn final_check(&mut self, state: &mut Loop, outcome: Outcome) -> Outcome {
        if outcome.early_stop().is_none() {
            return outcome;
        }
        let head = self.verifier.workspace.head().ok();
        if head.is_none() || head != state.tested_at {
            match self.verify(state) {
                Ok(tests) => self.record(state, "final test run", &tests.summary()),
                Err(fatal) => return Outcome::HarnessError(fatal.to_string()),
            }
        }
        if state.tests.passed {
            Outcome::Passed
        } else {
            outcome
        }
    }
}

/// An earlier attempt's conversation, made whole and told where things stand: calls it made
/// that never ran are answered so, and the tests of the branch as it is are given.
fn resumed(mut messages: Vec<Message>, now: &TestResult) -> Vec<Message> {
    let dangling: Vec<String> = match messages.last() {
        Some(last) if last.role == Role::Assistant => last
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolUse { id, .. } => Some(id.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let mut answer: Vec<ContentBlock> = dangling
        .into_iter()
        .map(|id| ContentBlock::ToolResult {
            tool_use_id: id,
            content: "not run: the run stopped before this call ran".into(),
            is_error: true,
        })
        .collect();
    answer.push(ContentBlock::text(format!(
        "The run stopped here and has been resumed, with a fresh budget, on the same branch. \
         The harness ran the tests of the branch as it is now.\n{}",
        describe_for_model(now)
    )));
    match messages.last_mut() {
        Some(last) if last.role == Role::User => last.content.extend(answer),
        _ => messages.push(Message::user(answer)),
    }
    messages
}

/// The task, the repository's instructions, the first test result, then what the brief adds
/// (the failing tests' context, a map of the repository).
fn first_message(task: &str, brief: &crate::brief::Brief, initial: &TestResult) -> String {
    let mut parts = vec![format!("Task: {task}")];
    parts.extend(brief.instructions.as_ref().map(|i| i.section()));
    parts.push(format!(
        "Before any change, the harness ran the tests.\n{}",
        describe_for_model(initial)
    ));
    parts.extend(brief.sections(initial));
    parts.join("\n\n")
}

/// Identical calls with identical results in a row: a warning, then the end of the run.
const WARN_AFTER: u32 = 3;
const STUCK_AFTER: u32 = 5;

const CUT_OFF: &str = "Your reply was cut off at the token limit. Continue where you stopped, \
in smaller steps.";

/// The tokens the next request will hold: what the API counted for the last one, and for
/// what was added since, a byte count (about 3 bytes a token for code, so rather too many).
fn estimate(state: &Loop) -> u64 {
    let now = conversation_bytes(&state.messages);
    // Before the first count, or from a server that counts nothing, the bytes say it all.
    if state.context_used == 0 {
        return (state.fixed_bytes + now) as u64 / 3;
    }
    let added = now.saturating_sub(state.sent_bytes) as u64;
    state.context_used + added / 3
}

fn conversation_bytes(messages: &[Message]) -> usize {
    serde_json::to_string(messages).map_or(0, |text| text.len())
}

async fn wait_for(flag: &AtomicBool) {
    while !flag.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn failing() -> TestResult {
        TestResult::not_run("make test", "it stopped")
    }

    #[test]
    fn a_resumed_conversation_answers_calls_that_never_ran_and_gives_the_tests() {
        let task = Message::user(vec![ContentBlock::text("Task")]);
        let call = Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::text("Editing."),
                ContentBlock::ToolUse {
                    id: "t1".into(),
                    name: "edit_file".into(),
                    input: json!({}),
                },
            ],
        };
        let resumed_after_call = resumed(vec![task.clone(), call.clone()], &failing());
        assert_eq!(resumed_after_call.len(), 3);
        let answer = &resumed_after_call[2];
        assert_eq!(answer.role, Role::User);
        assert_eq!(
            answer.content[0],
            ContentBlock::ToolResult {
                tool_use_id: "t1".into(),
                content: "not run: the run stopped before this call ran".into(),
                is_error: true
            }
        );
        let ContentBlock::Text { text } = &answer.content[1] else {
            panic!("the tests follow the answers");
        };
        assert!(
            text.starts_with("The run stopped here and has been resumed"),
            "{text}"
        );
        assert!(text.contains("Tests (make test)"), "{text}");

        // Ended on the harness's own message: the news joins it, the roles still alternate.
        let resumed_after_user = resumed(vec![task.clone()], &failing());
        assert_eq!(resumed_after_user.len(), 1);
        assert_eq!(resumed_after_user[0].content.len(), 2);
    }
}
