//! run_command: a shell in the sandbox. Whatever the command does to the work tree is
//! inspected afterwards: protected paths are put back, a moved branch is restored, and the
//! rest becomes one commit, like an edit.

use super::{parse_input, short, Tool, ToolContext, ToolError, ToolOutcome};
use crate::model::ToolSpec;
use crate::workspace::CommitOutcome;
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Duration;

pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
const HEAD_CHARS: usize = 4_000;
const TAIL_CHARS: usize = 8_000;

pub struct RunCommand;

#[derive(Deserialize)]
struct CommandArgs {
    command: String,
    timeout_secs: Option<u64>,
}

impl Tool for RunCommand {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "run_command",
            description:
                "Run a shell command (sh -c) in the repository root, in a sandbox: no network, \
                writes only inside the repository and $TMPDIR, limits on processes, file size and \
                CPU. Returns the exit code and the output (stdout and stderr interleaved; long \
                output keeps its head and tail). Files the command changes are committed as one \
                commit; changes to test files are reverted, and git's branches cannot be moved.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The shell command."},
                    "timeout_secs": {"type": "integer", "minimum": 1, "description": "Seconds before the command and everything it started are killed (default 120)."}
                },
                "required": ["command"]
            }),
        }
    }

    fn label(&self, input: &Value) -> String {
        let command = input.get("command").and_then(Value::as_str).unwrap_or("");
        format!("run `{}`", one_line(command, 60))
    }

    fn run(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutcome, ToolError> {
        let args: CommandArgs = parse_input("run_command", input)?;
        if args.command.contains('\0') {
            return Ok(ToolOutcome::error(
                "refused: the command contains a NUL byte, which no shell can run",
                "refused: NUL in command",
            ));
        }
        let sandbox = ctx.sandbox;
        if let Some(refusal) = sandbox.refusal() {
            return Ok(ToolOutcome::error(refusal, "refused: no sandbox"));
        }
        let jail = sandbox.model_jail();
        let asked = args.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS).max(1);
        let timeout = asked.min(ctx.max_command_secs);
        let workspace = ctx.workspace;
        // Confined, the command cannot write the git dir, the index included.
        let before = workspace.snapshot()?.git_dir_sealed(sandbox.confines());
        let raw = sandbox
            .run(
                &jail,
                &args.command,
                Duration::from_secs(timeout),
                ctx.interrupt,
                &mut |_| {},
            )
            .map_err(|source| crate::verify::VerifyError::Start {
                command: args.command.clone(),
                source,
            })?;
        let subject = format!("agent-git: run {}", one_line(&args.command, 50));
        let hooks = ctx.hooks();
        let absorbed = workspace.absorb_command(
            &subject,
            ctx.note,
            ctx.guard.protection(),
            &before,
            &*hooks,
        )?;

        let status = match (raw.exit_code, raw.timed_out, raw.interrupted) {
            (_, true, _) => format!("killed after {timeout} s (timeout)"),
            (_, _, true) => "interrupted".to_string(),
            (Some(code), _, _) => format!("exit code {code}"),
            (None, _, _) => "killed by a signal".to_string(),
        };
        let mut text = format!("{status}\n{}", cap(&raw.output));
        if asked > timeout {
            text.push_str(&format!("\n[timeout_secs was capped at {timeout}]"));
        }
        let mut refused = Vec::new();
        if !absorbed.reverted.is_empty() {
            refused.push(format!(
                "refused: the command changed protected test files ({}); they were put back",
                absorbed.reverted.join(", ")
            ));
        }
        if !absorbed.restored.is_empty() {
            refused.push(format!(
                "refused: the command moved git state ({}); it was restored. The harness \
                 commits for you",
                absorbed.restored.join(", ")
            ));
        }
        let committed = match absorbed.commit.outcome {
            CommitOutcome::Committed(oid) => Some(oid),
            _ => None,
        };
        if let CommitOutcome::Refused(paths) = &absorbed.commit.outcome {
            refused.push(super::refused_protected(paths));
        }
        if let CommitOutcome::Rejected { hook, output } = &absorbed.commit.outcome {
            refused.push(super::rejected_by_hook(hook, output).content);
        }
        refused.extend(super::dropped_lines(&absorbed.commit.dropped));
        text.push_str(match committed {
            Some(_) => "\n[the files it changed were committed]",
            None => "\n[no file changes to commit]",
        });
        for line in &refused {
            text.push_str(&format!("\n{line}"));
        }
        let mut summary = status;
        if let Some(oid) = committed {
            summary.push_str(&format!(", commit {}", short(oid)));
        }
        let config_refused = matches!(absorbed.commit.outcome, CommitOutcome::Refused(_));
        if !absorbed.reverted.is_empty() || config_refused {
            summary.push_str(", refused: protected");
        }
        if !absorbed.commit.dropped.is_empty() {
            summary.push_str(", refused: not committable");
        }
        if !absorbed.restored.is_empty() {
            summary.push_str(", refused: git state restored");
        }
        if let CommitOutcome::Rejected { hook, .. } = &absorbed.commit.outcome {
            summary.push_str(&format!(", refused: {hook} hook"));
        }
        Ok(ToolOutcome {
            commit: committed,
            is_error: !refused.is_empty(),
            ..ToolOutcome::ok(text, summary)
        })
    }
}

/// The first line of a command, at most `max` characters: for subjects and labels.
fn one_line(command: &str, max: usize) -> String {
    let first = command.trim().lines().next().unwrap_or("");
    let mut line: String = first.chars().take(max).collect();
    if line.len() < first.len() || command.trim().lines().count() > 1 {
        line.push_str("...");
    }
    line
}

/// Head and tail of long output, with a note of what was cut.
fn cap(output: &str) -> String {
    let chars: Vec<char> = output.chars().collect();
    if chars.len() <= HEAD_CHARS + TAIL_CHARS {
        return output.to_string();
    }
    let head: String = chars[..HEAD_CHARS].iter().collect();
    let tail: String = chars[chars.len() - TAIL_CHARS..].iter().collect();
    let cut = chars.len() - HEAD_CHARS - TAIL_CHARS;
    format!("{head}\n[... {cut} characters cut ...]\n{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_output_keeps_head_and_tail() {
        let output = format!(
            "{}{}{}",
            "a".repeat(HEAD_CHARS),
            "b".repeat(100),
            "c".repeat(TAIL_CHARS)
        );
        let capped = cap(&output);
        assert!(capped.starts_with(&"a".repeat(HEAD_CHARS)));
        assert!(capped.contains("[... 100 characters cut ...]"));
        assert!(capped.ends_with(&"c".repeat(TAIL_CHARS)));
        assert_eq!(cap("short"), "short");
    }

    #[test]
    fn subjects_take_the_first_line() {
        assert_eq!(one_line("sed -i s/a/b/ x.py", 50), "sed -i s/a/b/ x.py");
        assert_eq!(one_line("echo 1\necho 2", 50), "echo 1...");
        assert_eq!(one_line(&"x".repeat(80), 10), "xxxxxxxxxx...");
    }
}
