//! OpenAI-compatible Chat Completions with tools (OpenAI, Ollama's /v1, vLLM, llama.cpp).
//! The conversation is kept in the Anthropic shape and translated at this edge.

use super::http::Provider;
use super::{ContentBlock, Message, ModelError, Reply, Request, Role, StopReason, Usage};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU32, Ordering};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// How a request states the reply's token limit. OpenAI's reasoning models refuse
/// `max_tokens` (400 `unsupported_parameter`); Ollama, vLLM and llama.cpp read `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenLimit {
    /// `max_tokens`: what Ollama, vLLM, llama.cpp and OpenAI's other models read.
    MaxTokens,
    /// `max_completion_tokens`: what OpenAI's gpt-5 and o-series reasoning models take.
    MaxCompletionTokens,
}

impl TokenLimit {
    /// By model name: the gpt-5 and o-series reasoning models take `max_completion_tokens`.
    pub fn for_model(model: &str) -> Self {
        let name = model.rsplit('/').next().unwrap_or(model);
        let reasoning = name.starts_with("gpt-5")
            || ["o1", "o3", "o4"]
                .iter()
                .any(|series| name == *series || name.starts_with(&format!("{series}-")));
        if reasoning {
            TokenLimit::MaxCompletionTokens
        } else {
            TokenLimit::MaxTokens
        }
    }

    /// From git config `agent-git.tokenParam`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "max_tokens" => Ok(TokenLimit::MaxTokens),
            "max_completion_tokens" => Ok(TokenLimit::MaxCompletionTokens),
            other => Err(format!(
                "agent-git.tokenParam is `{other}`; use max_tokens or max_completion_tokens"
            )),
        }
    }

    fn field(self) -> &'static str {
        match self {
            TokenLimit::MaxTokens => "max_tokens",
            TokenLimit::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

/// Chat Completions (`POST {base}/chat/completions`) for one model, on OpenAI or a compatible
/// server.
pub struct OpenAi {
    /// The model's name, as the server knows it.
    pub model: String,
    /// The most tokens of one reply.
    pub max_tokens: u32,
    /// Which field tells the server `max_tokens`.
    pub token_limit: TokenLimit,
    /// The API's root, `/v1` included (`https://api.openai.com/v1`).
    pub base_url: String,
    /// Optional: local servers need none.
    pub api_key: Option<String>,
    /// The reasoning effort asked of a reasoning model.
    pub effort: Option<super::Effort>,
    /// Numbers tool calls that arrive without an id.
    pub generated_ids: AtomicU32,
}

impl OpenAi {
    /// Chat Completions of `model` at `base_url`: the token-limit field chosen by the model's name,
    /// no reasoning effort.
    pub fn new(model: &str, max_tokens: u32, base_url: &str, api_key: Option<String>) -> Self {
        OpenAi {
            model: model.to_string(),
            max_tokens,
            token_limit: TokenLimit::for_model(model),
            base_url: base_url.to_string(),
            api_key,
            effort: None,
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
            // Content may be null only beside tool calls: servers refuse an assistant message
            // with neither (OpenAI and Ollama answer 400).
            let content = match (text.is_empty(), calls.is_empty()) {
                (false, _) => json!(text),
                (true, false) => Value::Null,
                (true, true) => json!(EMPTY_REPLY),
            };
            let mut out = json!({"role": "assistant", "content": content});
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

/// What an empty assistant message says on the wire.
const EMPTY_REPLY: &str = "(no content)";

/// An OpenAI usage object as `Usage`, by the names its API gives the input and output
/// counts (`prompt_tokens`, `completion_tokens` in Chat Completions; `input_tokens`,
/// `output_tokens` in Responses), each with its `_details`: cached input is counted apart.
pub(super) fn usage_of(usage: &Value, [input, output]: [&str; 2]) -> Usage {
    let count = |v: &Value| v.as_u64().unwrap_or(0);
    let cached = count(&usage[format!("{input}_details")]["cached_tokens"]);
    Usage {
        input_tokens: count(&usage[input]).saturating_sub(cached),
        output_tokens: count(&usage[output]),
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: cached,
        reasoning_tokens: count(&usage[format!("{output}_details")]["reasoning_tokens"]),
    }
}

/// Arguments go back as a JSON text. Ones that did not parse were kept as the raw string (the
/// tool result quotes them); they go back as `{}`, since servers refuse a conversation that
/// holds invalid JSON arguments (Ollama answers 400, vLLM 500).
pub(super) fn arguments_text(input: &Value) -> String {
    match input {
        Value::String(_) => "{}".to_string(),
        other => other.to_string(),
    }
}

/// A call's arguments as servers send them: a JSON text (some send an object). A text that
/// is not JSON stays a string: the tool layer answers it with an error, not a crash.
pub(super) fn arguments_input(raw: &Value) -> Value {
    match raw {
        Value::String(text) if text.trim().is_empty() => json!({}),
        Value::String(text) => {
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone()))
        }
        Value::Null => json!({}),
        other => other.clone(),
    }
}

/// The key as a bearer token, where there is one.
pub(super) fn bearer(api_key: &Option<String>) -> Vec<(&'static str, String)> {
    match api_key {
        Some(key) => vec![("authorization", format!("Bearer {key}"))],
        None => Vec::new(),
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
        bearer(&self.api_key)
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
        let mut body = json!({"model": self.model, "messages": messages, "tools": tools});
        body[self.token_limit.field()] = json!(self.max_tokens);
        if let Some(effort) = self.effort {
            body["reasoning_effort"] = json!(effort.name());
        }
        body
    }

    /// Usage comes in a last chunk only when asked for.
    fn streamed(&self, body: &Value) -> Value {
        let mut body = body.clone();
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
        body
    }

    fn parse(&self, body: &str) -> Result<Reply, ModelError> {
        let bad = |what: &str| ModelError::BadResponse(format!("openai: {what}"));
        let value: Value = serde_json::from_str(body).map_err(|e| bad(&e.to_string()))?;
        if !value["error"].is_null() || value["object"] == "error" {
            return Err(bad(&super::errors::error_with_success(body)));
        }
        let choice = value["choices"]
            .get(0)
            .ok_or_else(|| bad("no choices in the response"))?;
        let message = &choice["message"];
        if !message.is_object() {
            return Err(bad("the choice holds no message"));
        }
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
            let input = arguments_input(&call["function"]["arguments"]);
            content.push(ContentBlock::ToolUse { id, name, input });
        }
        let has_calls = content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolUse { .. }));
        let stop_reason = match choice["finish_reason"].as_str() {
            _ if refusal.is_some() => StopReason::Refusal,
            // Cut off at the token limit: its tool calls may be cut too, and must not run.
            Some("length") => StopReason::MaxTokens,
            Some("content_filter") => StopReason::Refusal,
            // vLLM ends an aborted request with a 200: what came is no reply.
            Some(other @ ("abort" | "error")) => {
                return Err(bad(&format!(
                    "the server ended the reply with finish_reason {other}"
                )))
            }
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            _ if has_calls => StopReason::ToolUse,
            Some("stop") => StopReason::EndTurn,
            _ => StopReason::Unknown,
        };
        Ok(Reply {
            stop_reason,
            content,
            usage: usage_of(&value["usage"], ["prompt_tokens", "completion_tokens"]),
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
                        {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
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
                cache_read_input_tokens: 60,
                reasoning_tokens: 0,
            }
        );
    }

    #[test]
    fn reasoning_models_get_max_completion_tokens_and_others_max_tokens() {
        for model in [
            "gpt-5",
            "gpt-5-mini",
            "o1",
            "o3-mini",
            "o4-mini-2025-04-16",
            "openai/gpt-5",
        ] {
            assert_eq!(
                TokenLimit::for_model(model),
                TokenLimit::MaxCompletionTokens,
                "{model}"
            );
        }
        for model in [
            "gpt-4o",
            "gpt-4.1",
            "llama3.1:8b",
            "qwen2.5-coder",
            "o1x",
            "mistral-o3",
        ] {
            assert_eq!(
                TokenLimit::for_model(model),
                TokenLimit::MaxTokens,
                "{model}"
            );
        }
        let mut gpt5 = OpenAi::new("gpt-5", 900, DEFAULT_BASE_URL, None);
        let request = |p: &OpenAi| {
            p.body(&Request {
                system: "S",
                messages: &[],
                tools: &[],
            })
        };
        assert_eq!(request(&gpt5)["max_completion_tokens"], 900);
        assert!(request(&gpt5).get("max_tokens").is_none());
        gpt5.token_limit = TokenLimit::parse("max_tokens").unwrap();
        assert_eq!(request(&gpt5)["max_tokens"], 900);
        assert!(TokenLimit::parse("tokens").is_err());
    }

    #[test]
    fn an_empty_reply_goes_back_with_some_content() {
        let empty = Message {
            role: Role::Assistant,
            content: vec![ContentBlock::text("  ")],
        };
        assert_eq!(
            translate(&empty),
            vec![json!({"role": "assistant", "content": "(no content)"})]
        );
        let nothing = Message {
            role: Role::Assistant,
            content: vec![],
        };
        assert_eq!(
            translate(&nothing),
            vec![json!({"role": "assistant", "content": "(no content)"})]
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
        let cut = json!({"choices": [{"message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "c", "type": "function",
                "function": {"name": "write_file", "arguments": "{\"path\": \"a.py\", \"content\": \"def"}}]},
            "finish_reason": "length"}]});
        assert_eq!(
            provider().parse(&cut.to_string()).unwrap().stop_reason,
            StopReason::MaxTokens,
            "a tool call cut off at the limit"
        );
        let not_replies = [
            ("{}", "openai: no choices in the response"),
            (r#"{"choices": []}"#, "openai: no choices in the response"),
            (
                r#"{"choices": [{"finish_reason": "stop"}]}"#,
                "openai: the choice holds no message",
            ),
            (
                r#"{"object":"error","message":"Internal Server Error","type":"InternalServerError","code":500}"#,
                "openai: an error came with a success status: InternalServerError: Internal Server Error",
            ),
        ];
        for (body, said) in not_replies {
            let err = provider().parse(body).unwrap_err();
            assert_eq!(err.to_string(), format!("unreadable response: {said}"));
        }
    }
}
