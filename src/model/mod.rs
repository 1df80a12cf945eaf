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
pub use spec::{open_model, ModelOptions, ModelSpec};
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
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
        is_error: bool,
    },
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
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<ContentBlock>,
}

impl Message {
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
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    PauseTurn,
    Refusal,
    ModelContextWindowExceeded,
    #[serde(other)]
    Unknown,
}

/// One reply of the model: the unit the turn budget counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub stop_reason: StopReason,
    pub content: Vec<ContentBlock>,
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
    pub name: &'static str,
    pub description: &'static str,
    pub input_schema: Value,
}

pub struct Request<'a> {
    pub system: &'a str,
    pub messages: &'a [Message],
    pub tools: &'a [ToolSpec],
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("script exhausted: all {0} scripted replies were used and the model was called again")]
    ScriptExhausted(usize),
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
        message: String,
        /// The window in tokens, when the server named it.
        window: Option<u64>,
    },
    #[error("replay: {0}")]
    Replay(String),
}

/// Where the text of a streamed reply is shown as it arrives.
pub trait Echo: Send {
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
    pub fn into_inner(mut self) -> W {
        self.end();
        std::mem::take(&mut self.out)
    }
}

impl<W: std::io::Write + Send> IndentedEcho<W> {
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

#[async_trait::async_trait]
pub trait Model: Send {
    /// How the report names this model, e.g. `anthropic:claude-sonnet-4-5`.
    fn label(&self) -> String;
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
