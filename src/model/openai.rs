//! OpenAI-compatible Chat Completions with tools (OpenAI, Ollama's /v1, vLLM, llama.cpp).
//! The conversation is kept in the Anthropic shape and translated at this edge.

use super::http::Provider;
use super::{ContentBlock, Message, ModelError, Reply, Request, Role, StopReason, Usage};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU32, Ordering};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

pub struct OpenAi {
    pub model: String,
    pub max_tokens: u32,
    pub base_url: String,
    /// Optional: local servers need none.
    pub api_key: Option<String>,
    /// Numbers tool calls that arrive without an id.
    pub generated_ids: AtomicU32,
}

impl OpenAi {
    pub fn new(model: &str, max_tokens: u32, base_url: &str, api_key: Option<String>) -> Self {
        OpenAi {
            model: model.to_string(),
            max_tokens,
            base_url: base_url.to_string(),
            api_key,
            generated_ids: AtomicU32::new(0),
        }
    }
}

/// One internal message as one or more chat messages.
fn translate(message: &Message) -> Vec<Value> {
    let texts: Vec<&str> = message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } if !text.trim().is_empty() => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let text = texts.join("\n\n");
    match message.role {
        Role::Assistant => {
            let calls: Vec<Value> = message
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolUse { id, name, input } => Some(json!({
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments_text(input)},
                    })),
                    _ => None,
                })
                .collect();
            let mut out = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
            if !calls.is_empty() {
                out["tool_calls"] = json!(calls);
            }
            vec![out]
        }
        Role::User => {
            // Tool results first, as their own messages, then what the harness says.
            let mut out: Vec<Value> = message
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolResult { tool_use_id, content, is_error } => Some(json!({
                        "role": "tool",
                        "tool_call_id": tool_use_id,
                        "content": if *is_error { format!("ERROR: {content}") } else { content.clone() },
                    })),
                    _ => None,
                })
                .collect();
            if !text.is_empty() {
                out.push(json!({"role": "user", "content": text}));
            }
            out
        }
    }
}

/// Arguments go back as the model sent them: a JSON text. Ones that did not parse were kept
/// as a string, and go back as that string.
fn arguments_text(input: &Value) -> String {
    match input {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

impl Provider for OpenAi {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn url(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        match &self.api_key {
            Some(key) => vec![("authorization", format!("Bearer {key}"))],
            None => Vec::new(),
        }
    }

    fn body(&self, request: &Request<'_>) -> Value {
        let mut messages = vec![json!({"role": "system", "content": request.system})];
        messages.extend(request.messages.iter().flat_map(translate));
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema
                }})
            })
            .collect();
        json!({"model": self.model, "max_tokens": self.max_tokens, "messages": messages, "tools": tools})
    }

    fn parse(&self, body: &str) -> Result<Reply, ModelError> {
        let bad = |what: &str| ModelError::BadResponse(format!("openai: {what}"));
        let value: Value = serde_json::from_str(body).map_err(|e| bad(&e.to_string()))?;
        let choice = value["choices"]
            .get(0)
            .ok_or_else(|| bad("no choices in the response"))?;
        let message = &choice["message"];
        let mut content = Vec::new();
        if let Some(text) = message["content"].as_str().filter(|t| !t.trim().is_empty()) {
            content.push(ContentBlock::text(text));
        }
        let refusal = message["refusal"].as_str().filter(|t| !t.trim().is_empty());
        if let Some(text) = refusal {
            content.push(ContentBlock::text(text));
        }
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            let id = match call["id"].as_str().filter(|id| !id.is_empty()) {
                Some(id) => id.to_string(),
                None => format!(
                    "call_agent_git_{}",
                    self.generated_ids.fetch_add(1, Ordering::SeqCst) + 1
                ),
            };
            let name = call["function"]["name"].as_str().unwrap_or("").to_string();
            // Servers send arguments as a JSON text (some as an object). A text that is not
            // JSON stays a string: the tool layer answers it with an error, not a crash.
            let input = match &call["function"]["arguments"] {
                Value::String(raw) if raw.trim().is_empty() => json!({}),
                Value::String(raw) => {
                    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone()))
                }
                Value::Null => json!({}),
                other => other.clone(),
            };
            content.push(ContentBlock::ToolUse { id, name, input });
        }
        let has_calls = content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolUse { .. }));
        let stop_reason = match choice["finish_reason"].as_str() {
            _ if refusal.is_some() => StopReason::Refusal,
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            _ if has_calls => StopReason::ToolUse,
            Some("stop") => StopReason::EndTurn,
            Some("length") => StopReason::MaxTokens,
            Some("content_filter") => StopReason::Refusal,
            _ => StopReason::Unknown,
        };
        let usage = &value["usage"];
        let count = |v: &Value| v.as_u64().unwrap_or(0);
        let cached = count(&usage["prompt_tokens_details"]["cached_tokens"]);
        Ok(Reply {
            stop_reason,
            content,
            usage: Usage {
                input_tokens: count(&usage["prompt_tokens"]).saturating_sub(cached),
                output_tokens: count(&usage["completion_tokens"]),
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: cached,
            },
        })
    }

    fn hint(&self, status: u16) -> Option<String> {
        match status {
            401 => Some("check OPENAI_API_KEY".into()),
            404 => Some(format!(
                "check the model name `{}` and OPENAI_BASE_URL",
                self.model
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolSpec;

    fn provider() -> OpenAi {
        OpenAi::new(
            "gpt-4o",
            512,
            "http://127.0.0.1:1/v1/",
            Some("sk-test".into()),
        )
    }

    #[test]
    fn translates_the_conversation_to_chat_messages() {
        let tools = vec![ToolSpec {
            name: "read_file",
            description: "Read.",
            input_schema: json!({"type": "object"}),
        }];
        let messages = vec![
            Message::user(vec![ContentBlock::text("Task")]),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::text("Reading."),
                    ContentBlock::ToolUse {
                        id: "c1".into(),
                        name: "read_file".into(),
                        input: json!({"path": "a.py"}),
                    },
                    ContentBlock::ToolUse {
                        id: "c2".into(),
                        name: "read_file".into(),
                        input: json!("{bad"),
                    },
                ],
            },
            Message::user(vec![
                ContentBlock::ToolResult {
                    tool_use_id: "c1".into(),
                    content: "1\tx".into(),
                    is_error: false,
                },
                ContentBlock::ToolResult {
                    tool_use_id: "c2".into(),
                    content: "bad input".into(),
                    is_error: true,
                },
                ContentBlock::text("Note: tests fail."),
            ]),
        ];
        let body = provider().body(&Request {
            system: "Sys",
            messages: &messages,
            tools: &tools,
        });
        assert_eq!(
            body,
            json!({
                "model": "gpt-4o",
                "max_tokens": 512,
                "messages": [
                    {"role": "system", "content": "Sys"},
                    {"role": "user", "content": "Task"},
                    {"role": "assistant", "content": "Reading.", "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.py\"}"}},
                        {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": "{bad"}}
                    ]},
                    {"role": "tool", "tool_call_id": "c1", "content": "1\tx"},
                    {"role": "tool", "tool_call_id": "c2", "content": "ERROR: bad input"},
                    {"role": "user", "content": "Note: tests fail."}
                ],
                "tools": [{"type": "function", "function": {"name": "read_file", "description": "Read.", "parameters": {"type": "object"}}}]
            })
        );
        assert_eq!(provider().url(), "http://127.0.0.1:1/v1/chat/completions");
    }

    #[test]
    fn parses_tool_calls_null_content_bad_arguments_and_missing_ids() {
        let body = r#"{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,
            "message":{"role":"assistant","content":null,"tool_calls":[
                {"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"calc.py\"}"}},
                {"type":"function","function":{"name":"edit_file","arguments":"{\"path\": \"calc.py\", oops"}},
                {"id":"","type":"function","function":{"name":"run_tests","arguments":{}}}]},
            "logprobs":null,"finish_reason":"tool_calls"}],
            "usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,"prompt_tokens_details":{"cached_tokens":60}}}"#;
        let reply = provider().parse(body).unwrap();
        assert_eq!(reply.stop_reason, StopReason::ToolUse);
        assert_eq!(
            reply.content,
            vec![
                ContentBlock::ToolUse {
                    id: "call_1".into(),
                    name: "read_file".into(),
                    input: json!({"path": "calc.py"})
                },
                ContentBlock::ToolUse {
                    id: "call_agent_git_1".into(),
                    name: "edit_file".into(),
                    input: json!("{\"path\": \"calc.py\", oops")
                },
                ContentBlock::ToolUse {
                    id: "call_agent_git_2".into(),
                    name: "run_tests".into(),
                    input: json!({})
                },
            ]
        );
        assert_eq!(
            reply.usage,
            Usage {
                input_tokens: 40,
                output_tokens: 20,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 60
            }
        );
    }

    #[test]
    fn maps_finish_reasons() {
        let reply = |finish: &str| {
            let body = json!({"choices": [{"message": {"role": "assistant", "content": "x"}, "finish_reason": finish}]});
            provider().parse(&body.to_string()).unwrap().stop_reason
        };
        assert_eq!(reply("stop"), StopReason::EndTurn);
        assert_eq!(reply("length"), StopReason::MaxTokens);
        assert_eq!(reply("content_filter"), StopReason::Refusal);
        assert_eq!(reply("weird"), StopReason::Unknown);
        assert!(provider().parse(r#"{"choices": []}"#).is_err());
    }
}
