//! The model seam: the loop talks to `dyn Model` and never learns which model it is.
//! Messages use the Anthropic Messages content blocks, the shape the real adapters speak.

mod anthropic;
mod errors;
mod http;
mod openai;
mod price;
mod reasoning;
mod replay;
mod responses;
mod responses_stream;
mod retry;
mod scripted;
mod spec;
mod stream;
mod window;

pub use anthropic::Anthropic;
pub use http::{HttpModel, Provider, Recorder};
pub use openai::{OpenAi, TokenLimit};
pub use price::{ListedPrice, Price, Usage};
pub use reasoning::{Effort, Reasoning, Thinking};
pub use replay::ReplayModel;
pub use responses::Responses;
pub use responses_stream::ResponsesStream;
pub use retry::RetryPolicy;
pub use scripted::ScriptedModel;
pub use spec::{check_credentials, open_model, ModelOptions, ModelSpec};
pub use stream::{
    read_stream, AnthropicStream, Assembler, OpenAiStream, StreamError, StreamFailure,
};
pub use window::published as published_window;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// A content block. Blocks of types agent-git does not model (thinking, redacted_thinking,
/// server tools...) are kept as they came, to be sent back unchanged.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentBlock {
    /// Text the model wrote, or the harness's words to it.
    Text {
        /// The text, as sent or received.
        text: String,
    },
    /// A tool call of the model's.
    ToolUse {
        /// The call's id, which its result names.
        id: String,
        /// The tool called.
        name: String,
        /// The tool's input, as the model wrote it: an object, or where a reply was cut off
        /// inside the call, the raw text.
        input: Value,
    },
    /// The harness's answer to a tool call, in the next user message.
    ToolResult {
        /// The id of the call it answers.
        tool_use_id: String,
        /// What the tool returned, as the model reads it.
        content: String,
        /// The call failed or was refused: the content says why.
        is_error: bool,
    },
    /// A block of any other type, kept whole as it came.
    Other(Value),
}

/// The blocks agent-git understands, in their wire shape.
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Known {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let known = match self.clone() {
            ContentBlock::Text { text } => Known::Text { text },
            ContentBlock::ToolUse { id, name, input } => Known::ToolUse { id, name, input },
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => Known::ToolResult {
                tool_use_id,
                content,
                is_error,
            },
            ContentBlock::Other(value) => return value.serialize(serializer),
        };
        known.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        match value.get("type").and_then(Value::as_str) {
            Some("text" | "tool_use" | "tool_result") => {
                let known = Known::deserialize(value).map_err(D::Error::custom)?;
                Ok(match known {
                    Known::Text { text } => ContentBlock::Text { text },
                    Known::ToolUse { id, name, input } => ContentBlock::ToolUse { id, name, input },
                    Known::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    } => ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    },
                })
            }
            Some(_) => Ok(ContentBlock::Other(value)),
            None => Err(D::Error::custom("a content block needs a \"type\"")),
        }
    }
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }
}

/// Who a message is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The harness: the task, tool results and test feedback.
    User,
    /// The model.
    Assistant,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who it is from.
    pub role: Role,
    /// Its blocks, in order.
    pub content: Vec<ContentBlock>,
}

impl Message {
    /// A message from the harness.
    pub fn user(content: Vec<ContentBlock>) -> Self {
        Message {
            role: Role::User,
            content,
        }
    }
}

/// Why the model stopped. Stop reasons this version does not know parse as `Unknown` and are
/// treated like the end of a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model ended its turn: the harness runs the tests.
    EndTurn,
    /// The reply holds tool calls to run.
    ToolUse,
    /// The reply was cut off at the token limit: its tool calls do not run, and the model is asked
    /// to go on.
    MaxTokens,
    /// A stop sequence ended the reply; agent-git sends none, so this is handled as the end of a
    /// turn.
    StopSequence,
    /// The API paused a long turn; sending the conversation back lets it go on.
    PauseTurn,
    /// The model (or the server's content filter) refused: the run stops.
    Refusal,
    /// The reply ran into the end of the context window: it is dropped, and the conversation shrunk
    /// and sent again.
    ModelContextWindowExceeded,
    /// A stop reason this version does not know; handled as the end of a turn.
    #[serde(other)]
    Unknown,
}

/// One reply of the model: the unit the turn budget counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// What it wrote: text, tool calls, and blocks kept as they came.
    pub content: Vec<ContentBlock>,
    /// The tokens the reply took; zero where the server did not say.
    #[serde(default)]
    pub usage: Usage,
}

impl Reply {
    /// The text blocks of the reply, joined: what the model said alongside its tool calls.
    pub fn text(&self) -> String {
        let parts: Vec<&str> = self
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } => Some(text.trim()),
                _ => None,
            })
            .filter(|t| !t.is_empty())
            .collect();
        parts.join("\n\n")
    }
}

/// A tool as the model sees it: a name, what it does, and a JSON schema of its input.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: &'static str,
    /// What it does and when to use it, for the model.
    pub description: &'static str,
    /// The JSON schema of its input.
    pub input_schema: Value,
}

/// What one reply is asked for: the system prompt, the whole conversation so far and the tools.
pub struct Request<'a> {
    /// The system prompt.
    pub system: &'a str,
    /// The conversation so far, oldest first.
    pub messages: &'a [Message],
    /// The tools the model may call.
    pub tools: &'a [ToolSpec],
}

/// Why a model gave no reply.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A script was asked for more replies than it holds: how many it held.
    #[error("script exhausted: all {0} scripted replies were used and the model was called again")]
    ScriptExhausted(usize),
    /// Ctrl-C came while the reply was awaited.
    #[error("interrupted while waiting for the model")]
    Interrupted,
    /// The API answered with an error that retrying will not fix (or retries ran out).
    #[error("{0}")]
    Api(String),
    /// The API's answer could not be read.
    #[error("unreadable response: {0}")]
    BadResponse(String),
    /// The request does not fit the model's context window: the conversation must shrink.
    #[error("the prompt is too long for the model's context window: {message}")]
    ContextOverflow {
        /// The server's message.
        message: String,
        /// The window in tokens, when the server named it.
        window: Option<u64>,
    },
    /// A replay was asked for more replies than its recording holds.
    #[error("replay: {0}")]
    Replay(String),
}

/// Where the text of a streamed reply is shown as it arrives.
pub trait Echo: Send {
    /// Shows the next piece of the reply's text.
    fn text(&mut self, piece: &str);
    /// The reply (or its stream) ended.
    fn end(&mut self);
}

/// Shows each reply as one indented block: dimmed on a terminal, plain elsewhere.
pub struct IndentedEcho<W: std::io::Write + Send> {
    out: W,
    terminal: bool,
    at_line_start: bool,
    open: bool,
}

impl<W: std::io::Write + Send + Default> IndentedEcho<W> {
    /// Ends the open block, and gives back what was written to.
    pub fn into_inner(mut self) -> W {
        self.end();
        std::mem::take(&mut self.out)
    }
}

impl<W: std::io::Write + Send> IndentedEcho<W> {
    /// Writes to `out`; `terminal` dims the text with escape codes.
    pub fn new(out: W, terminal: bool) -> Self {
        IndentedEcho {
            out,
            terminal,
            at_line_start: true,
            open: false,
        }
    }
}

/// A stream dropped midway (Ctrl-C) still leaves the terminal as it found it.
impl<W: std::io::Write + Send> Drop for IndentedEcho<W> {
    fn drop(&mut self) {
        self.end();
    }
}

const INDENT: &str = "    ";

impl<W: std::io::Write + Send> Echo for IndentedEcho<W> {
    fn text(&mut self, piece: &str) {
        let mut shown = String::new();
        if !self.open && self.terminal {
            shown.push_str("\x1b[2m");
        }
        self.open = true;
        for c in piece.chars() {
            if self.at_line_start && c != '\n' {
                shown.push_str(INDENT);
            }
            shown.push(c);
            self.at_line_start = c == '\n';
        }
        // What cannot be shown is not worth failing a reply for.
        let _ = self
            .out
            .write_all(shown.as_bytes())
            .and_then(|_| self.out.flush());
    }

    fn end(&mut self) {
        if !self.open {
            return;
        }
        let mut shown = String::new();
        if !self.at_line_start {
            shown.push('\n');
        }
        if self.terminal {
            shown.push_str("\x1b[0m");
        }
        let _ = self
            .out
            .write_all(shown.as_bytes())
            .and_then(|_| self.out.flush());
        self.open = false;
        self.at_line_start = true;
    }
}

/// What the loop talks to: a model that answers a request with one reply. Scripts, replays and
/// the HTTP APIs each implement it.
#[async_trait::async_trait]
pub trait Model: Send {
    /// How the report names this model, e.g. `anthropic:claude-sonnet-4-5`.
    fn label(&self) -> String;
    /// The model's next reply to the conversation in `request`.
    async fn reply(&mut self, request: &Request<'_>) -> Result<Reply, ModelError>;
    /// Things the report should say about this model's run (a replay's divergences).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// The provider's model name, for prices and context windows; None for a script.
    fn model_name(&self) -> Option<String> {
        None
    }

    /// The context window a server named for this model, when it was asked.
    fn context_window(&self) -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_blocks_survive_a_round_trip_unchanged() {
        let thinking = json!({"type": "thinking", "thinking": "hmm", "signature": "abc"});
        let block: ContentBlock = serde_json::from_value(thinking.clone()).unwrap();
        assert_eq!(block, ContentBlock::Other(thinking.clone()));
        assert_eq!(serde_json::to_value(&block).unwrap(), thinking);

        let tool: ContentBlock = serde_json::from_value(
            json!({"type": "tool_use", "id": "t", "name": "n", "input": {}, "caller": {"type": "direct"}}),
        )
        .unwrap();
        assert_eq!(
            tool,
            ContentBlock::ToolUse {
                id: "t".into(),
                name: "n".into(),
                input: json!({})
            }
        );
        assert!(serde_json::from_value::<ContentBlock>(json!({"text": "no type"})).is_err());
    }

    #[test]
    fn streamed_text_is_shown_as_one_indented_block_per_reply() {
        let mut echo = IndentedEcho::new(Vec::new(), false);
        for piece in [
            "Reading",
            " calc.py.\nadd() sub",
            "tracts.",
            "\n\nFix",
            "ing.",
        ] {
            echo.text(piece);
        }
        echo.end();
        echo.end();
        echo.text("Done.\n");
        echo.end();
        assert_eq!(
            String::from_utf8(echo.into_inner()).unwrap(),
            "    Reading calc.py.\n    add() subtracts.\n\n    Fixing.\n    Done.\n"
        );
        let mut echo = IndentedEcho::new(Vec::new(), true);
        echo.text("Hi");
        echo.end();
        assert_eq!(
            String::from_utf8(echo.into_inner()).unwrap(),
            "\x1b[2m    Hi\n\x1b[0m"
        );
    }

    #[test]
    fn unknown_stop_reasons_parse() {
        let reply: Reply =
            serde_json::from_value(json!({"stop_reason": "something_new", "content": []})).unwrap();
        assert_eq!(reply.stop_reason, StopReason::Unknown);
        assert_eq!(reply.usage, Usage::default());
    }
}
