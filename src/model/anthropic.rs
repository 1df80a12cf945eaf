//! The Anthropic Messages API.

use super::http::Provider;
use super::{ContentBlock, Message, ModelError, Reply, Request, StopReason, Usage};
use serde::Deserialize;
use serde_json::{json, Value};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub const API_VERSION: &str = "2023-06-01";

/// The Anthropic Messages API (`POST {base}/v1/messages`) for one model.
pub struct Anthropic {
    /// The model's name (`claude-sonnet-4-5`).
    pub model: String,
    /// `max_tokens`: the most tokens of one reply, thinking included.
    pub max_tokens: u32,
    /// The API's root, without `/v1` (`https://api.anthropic.com`).
    pub base_url: String,
    /// Empty when replaying a recording: no call is made then.
    pub api_key: String,
    /// Extended thinking, where the model is asked to think.
    pub reasoning: super::Reasoning,
}

#[derive(Deserialize)]
struct Response {
    /// Required: a body without it (`{}`, an error object sent with a 200) is no reply.
    content: Vec<ContentBlock>,
    stop_reason: Option<StopReason>,
    #[serde(default)]
    usage: Usage,
}

/// Marks a block as a cache breakpoint: everything up to it is cached for the next turn.
fn with_cache_control(mut block: Value) -> Value {
    if let Some(object) = block.as_object_mut() {
        object.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
    block
}

/// The API refuses empty text blocks and empty messages; a reply can hold either. It also
/// refuses a tool call whose input is not an object, which a reply cut off inside the call
/// leaves (kept as the raw text): that goes back as `{}`, answered as not run.
fn wire_content(message: &Message) -> Vec<Value> {
    let blocks: Vec<Value> = message
        .content
        .iter()
        .filter(|b| !matches!(b, ContentBlock::Text { text } if text.trim().is_empty()))
        .map(|b| match b {
            ContentBlock::ToolUse { id, name, input } if !input.is_object() => {
                json!({"type": "tool_use", "id": id, "name": name, "input": {}})
            }
            other => serde_json::to_value(other).unwrap_or(Value::Null),
        })
        .collect();
    if blocks.is_empty() {
        vec![json!({"type": "text", "text": "(no content)"})]
    } else {
        blocks
    }
}

impl Provider for Anthropic {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn url(&self) -> String {
        format!("{}/v1/messages", self.base_url.trim_end_matches('/'))
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![
            ("x-api-key", self.api_key.clone()),
            ("anthropic-version", API_VERSION.to_string()),
        ];
        if let super::Reasoning::Budget {
            interleaved: true, ..
        } = self.reasoning
        {
            headers.push(("anthropic-beta", super::reasoning::INTERLEAVED_BETA.into()));
        }
        headers
    }

    /// Two cache breakpoints: the system prompt (which caches tools and system), and the last
    /// block of the newest message (which caches the conversation so far). Earlier messages
    /// are sent exactly as before, so each turn reads the previous turn's prefix.
    fn body(&self, request: &Request<'_>) -> Value {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
        let last = request.messages.len().saturating_sub(1);
        let messages: Vec<Value> = request
            .messages
            .iter()
            .enumerate()
            .map(|(i, message)| {
                let mut content = wire_content(message);
                let cacheable = |b: &Value| {
                    matches!(
                        b["type"].as_str(),
                        Some("text" | "tool_use" | "tool_result")
                    )
                };
                if i == last {
                    if let Some(pos) = content.iter().rposition(cacheable) {
                        content[pos] = with_cache_control(content[pos].take());
                    }
                }
                json!({"role": message.role, "content": content})
            })
            .collect();
        let system = with_cache_control(json!({"type": "text", "text": request.system}));
        let mut body = json!({
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": [system],
            "tools": tools,
            "messages": messages,
        });
        // No temperature is ever sent: thinking refuses one.
        match self.reasoning {
            super::Reasoning::Budget { tokens, .. } => {
                body["thinking"] = json!({"type": "enabled", "budget_tokens": tokens});
            }
            super::Reasoning::Adaptive { .. } => body["thinking"] = json!({"type": "adaptive"}),
            super::Reasoning::Off | super::Reasoning::Effort(_) => {}
        }
        body
    }

    fn streamed(&self, body: &Value) -> Value {
        let mut body = body.clone();
        body["stream"] = json!(true);
        body
    }

    fn parse(&self, body: &str) -> Result<Reply, ModelError> {
        let bad = |what: String| ModelError::BadResponse(format!("anthropic: {what}"));
        let value: Value = serde_json::from_str(body).map_err(|e| bad(e.to_string()))?;
        if value["type"] == "error" || !value["error"].is_null() {
            return Err(bad(super::errors::error_with_success(body)));
        }
        let response: Response = serde_json::from_value(value).map_err(|e| bad(e.to_string()))?;
        Ok(Reply {
            stop_reason: response.stop_reason.unwrap_or(StopReason::Unknown),
            content: response.content,
            usage: response.usage,
        })
    }

    fn hint(&self, status: u16) -> Option<String> {
        match status {
            401 => Some("check ANTHROPIC_API_KEY".into()),
            403 => Some("the key lacks permission for this model or endpoint".into()),
            404 => Some(format!(
                "check the model name `{}` and ANTHROPIC_BASE_URL",
                self.model
            )),
            413 => Some("the request is too large for the API".into()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Role, ToolSpec};

    fn provider() -> Anthropic {
        Anthropic {
            model: "claude-sonnet-4-5".into(),
            max_tokens: 1024,
            base_url: "http://127.0.0.1:1/".into(),
            api_key: "sk-test".into(),
            reasoning: Default::default(),
        }
    }

    #[test]
    fn the_body_places_cache_breakpoints_on_system_and_the_newest_message() {
        let tools = vec![ToolSpec {
            name: "run_tests",
            description: "Run.",
            input_schema: json!({"type": "object"}),
        }];
        let messages = vec![
            Message::user(vec![ContentBlock::text("Task")]),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::text(""),
                    ContentBlock::Other(
                        json!({"type": "thinking", "thinking": "t", "signature": "s"}),
                    ),
                    ContentBlock::ToolUse {
                        id: "a".into(),
                        name: "run_tests".into(),
                        input: json!({}),
                    },
                ],
            },
            Message::user(vec![ContentBlock::ToolResult {
                tool_use_id: "a".into(),
                content: "ok".into(),
                is_error: false,
            }]),
        ];
        let body = provider().body(&Request {
            system: "Be careful.",
            messages: &messages,
            tools: &tools,
        });
        assert_eq!(
            body,
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 1024,
                "system": [{"type": "text", "text": "Be careful.", "cache_control": {"type": "ephemeral"}}],
                "tools": [{"name": "run_tests", "description": "Run.", "input_schema": {"type": "object"}}],
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "Task"}]},
                    {"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "t", "signature": "s"},
                        {"type": "tool_use", "id": "a", "name": "run_tests", "input": {}}
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "a", "content": "ok", "cache_control": {"type": "ephemeral"}}
                    ]}
                ]
            })
        );
        assert_eq!(provider().url(), "http://127.0.0.1:1/v1/messages");
    }

    #[test]
    fn parses_replies_with_fields_and_blocks_it_does_not_model() {
        let body = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",
            "content":[{"type":"text","text":"Reading."},
                       {"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"calc.py"},"caller":{"type":"direct"}},
                       {"type":"server_tool_use","id":"s1","name":"web_search","input":{}}],
            "stop_reason":"tool_use","stop_sequence":null,
            "usage":{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":900,
                     "cache_creation":{"ephemeral_5m_input_tokens":100},"output_tokens":30,"service_tier":"standard"}}"#;
        let reply = provider().parse(body).unwrap();
        assert_eq!(reply.stop_reason, StopReason::ToolUse);
        assert_eq!(reply.content.len(), 3);
        assert!(
            matches!(&reply.content[1], ContentBlock::ToolUse { name, .. } if name == "read_file")
        );
        assert!(matches!(&reply.content[2], ContentBlock::Other(_)));
        assert_eq!(
            reply.usage,
            Usage {
                input_tokens: 12,
                output_tokens: 30,
                cache_creation_input_tokens: 100,
                cache_read_input_tokens: 900,
                reasoning_tokens: 0,
            }
        );
        assert!(provider().parse("{\"content\": 3}").is_err());
        let not_replies = [
            ("{}", "anthropic: missing field `content`"),
            (
                r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#,
                "anthropic: an error came with a success status: api_error: Internal server error",
            ),
            (
                "<html>ok</html>",
                "anthropic: expected value at line 1 column 1",
            ),
        ];
        for (body, said) in not_replies {
            let err = provider().parse(body).unwrap_err();
            assert_eq!(err.to_string(), format!("unreadable response: {said}"));
        }
    }
}
