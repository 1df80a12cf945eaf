//! ask_user: a question for the person who started the run, when one is at the terminal.

use super::{parse_input, Tool, ToolContext, ToolError, ToolOutcome};
use crate::model::ToolSpec;
use serde::Deserialize;
use serde_json::{json, Value};

pub struct AskUser;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AskArgs {
    question: String,
}

/// The longest question shown: a question, not a document.
const MAX_QUESTION: usize = 2_000;

const NOBODY: &str = "Nobody is available to answer: this run is not interactive. Decide \
yourself from the code and the tests, or, if you cannot go on without an answer, end your turn \
and say what you need to know.";

impl Tool for AskUser {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "ask_user",
            description: "Ask the person who started the run a question, when the task is \
                ambiguous and the code and tests cannot settle it. Often nobody is there: then \
                you are told so, and must decide yourself.",
            input_schema: json!({
                "type": "object",
                "properties": {"question": {"type": "string", "description": "One clear question."}},
                "required": ["question"]
            }),
        }
    }

    fn label(&self, input: &Value) -> String {
        let question = input["question"].as_str().unwrap_or("");
        let short: String = question.chars().take(60).collect();
        let more = if short.len() < question.len() {
            "..."
        } else {
            ""
        };
        format!("ask \"{short}{more}\"")
    }

    fn run(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutcome, ToolError> {
        let args: AskArgs = parse_input("ask_user", input)?;
        let question = args.question.trim();
        if question.is_empty() || question.len() > MAX_QUESTION {
            return Ok(ToolOutcome::error(
                format!("ask one question of at most {MAX_QUESTION} bytes"),
                "refused: invalid input",
            ));
        }
        Ok(match (ctx.ask)(question) {
            Some(answer) if !answer.trim().is_empty() => {
                let answer = answer.trim();
                ToolOutcome::ok(
                    format!("The person answered: {answer}"),
                    format!("answered: {answer}"),
                )
            }
            Some(_) => ToolOutcome::ok("The person gave no answer. Decide yourself.", "no answer"),
            None => ToolOutcome::ok(NOBODY, "nobody available"),
        })
    }
}
