//! The model seam: the loop talks to `dyn Model` and never learns which model it is.
//! Messages use the Anthropic Messages content blocks, the shape the real adapters speak.

mod scripted;
mod spec;

pub use scripted::ScriptedModel;
pub use spec::{open_model, ModelSpec};

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
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
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
}

/// One reply of the model: the unit the turn budget counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub stop_reason: StopReason,
    pub content: Vec<ContentBlock>,
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
}

#[async_trait::async_trait]
pub trait Model: Send {
    /// How the report names this model, e.g. `script:replies.json`.
    fn label(&self) -> String;
    async fn reply(&mut self, request: &Request<'_>) -> Result<Reply, ModelError>;
}
