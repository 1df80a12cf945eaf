//! `agent-git demo`: the real fix flow on a throwaway repository, with a built-in script.

use super::fix::{fix_with, FixArgs};
use super::CliError;
use crate::model::{ContentBlock, Reply, ScriptedModel, StopReason};
use clap::Args;
use serde_json::json;

const BRANCH: &str = "agent/demo-fix";
const TASK: &str = "The tests in test_calc.py fail. Find the bug and fix it.";

/// What `agent-git demo` takes: whether to keep the throwaway repository.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Keep the demo repository (its path is printed) instead of deleting it at the end.
    #[arg(long)]
    pub keep: bool,
}

/// Makes a throwaway repository whose test fails, runs the fix flow on it with the built-in script,
/// and prints its branch's log; the exit code is the fix run's.
pub fn run(args: DemoArgs) -> Result<u8, CliError> {
    let harness = |e: &dyn std::fmt::Display| CliError::Harness(format!("demo: {e}"));
    let dir = tempfile::Builder::new()
        .prefix("agent-git-demo-")
        .tempdir()
        .map_err(|e| harness(&e))?;
    let base = crate::workspace::demo::create_calc_repo(dir.path()).map_err(|e| harness(&e))?;
    eprintln!("agent-git: demo repository at {}", dir.path().display());
    let fix = demo_fix_args(dir.path()).map_err(|e| harness(&e))?;
    let model = ScriptedModel::new("demo-script (built in)", script());
    let code = fix_with(fix, Some(Box::new(model)))?;
    let log =
        crate::workspace::demo::branch_log(dir.path(), base, BRANCH).map_err(|e| harness(&e))?;
    println!(
        "\n=== git log --stat {}..{BRANCH} ===\n{log}",
        &base.to_string()[..7]
    );
    if args.keep {
        let kept = dir.keep();
        println!("The demo repository is kept at {}", kept.display());
    }
    Ok(code)
}

/// The fix command as a user would type it, so every default is the real one.
fn demo_fix_args(repo: &std::path::Path) -> Result<FixArgs, clap::Error> {
    #[derive(clap::Parser)]
    struct Line {
        #[command(flatten)]
        fix: FixArgs,
    }
    let repo = repo.display().to_string();
    let argv = ["fix", TASK, "--repo", &repo, "--branch", BRANCH];
    <Line as clap::Parser>::try_parse_from(argv).map(|line| line.fix)
}

fn tool(id: &str, name: &str, input: serde_json::Value) -> ContentBlock {
    ContentBlock::ToolUse {
        id: id.to_string(),
        name: name.to_string(),
        input,
    }
}

fn reply(stop_reason: StopReason, text: &str, calls: Vec<ContentBlock>) -> Reply {
    let mut content = vec![ContentBlock::text(text)];
    content.extend(calls);
    Reply {
        stop_reason,
        content,
        usage: Default::default(),
    }
}

/// A model that reads the code, makes a wrong edit the tests reject, tries to change the
/// test (refused by the harness), then makes the right fix.
fn script() -> Vec<Reply> {
    use StopReason::{EndTurn, ToolUse};
    vec![
        reply(
            ToolUse,
            "Let me see what the repository holds.",
            vec![tool("t1", "list_files", json!({}))],
        ),
        reply(
            ToolUse,
            "Reading the code under test and its test.",
            vec![
                tool("t2", "read_file", json!({"path": "calc.py"})),
                tool("t3", "read_file", json!({"path": "test_calc.py"})),
            ],
        ),
        reply(
            ToolUse,
            "add() gives the wrong sign: the operands look swapped.",
            vec![tool(
                "t4",
                "edit_file",
                json!({"path": "calc.py", "old_text": "return a - b", "new_text": "return b - a"}),
            )],
        ),
        reply(
            EndTurn,
            "I swapped the operands of add(); the tests should pass now.",
            vec![],
        ),
        reply(
            ToolUse,
            "Still failing. Perhaps the test expects the wrong value.",
            vec![tool(
                "t5",
                "edit_file",
                json!({"path": "test_calc.py", "old_text": "== 5", "new_text": "== -1"}),
            )],
        ),
        reply(
            ToolUse,
            "Right, the tests are not mine to change. add() must add, not subtract.",
            vec![tool(
                "t6",
                "edit_file",
                json!({"path": "calc.py", "old_text": "return b - a", "new_text": "return a + b"}),
            )],
        ),
        reply(
            ToolUse,
            "Checking by hand, then with the tests.",
            vec![
                tool(
                    "t7",
                    "run_command",
                    json!({"command": "python3 -c 'from calc import add; print(add(2, 3))'"}),
                ),
                tool("t8", "run_tests", json!({})),
            ],
        ),
        reply(EndTurn, "add() now returns a + b; the tests pass.", vec![]),
    ]
}
