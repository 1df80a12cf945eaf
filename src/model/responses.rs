//! OpenAI's Responses API (`POST {base}/responses`), stateless: `store: false`, so every
//! request carries the whole conversation, and a reasoning model's reasoning goes back each
//! turn as the encrypted items it came as. Chat Completions drops that reasoning between tool
//! calls. The conversation is kept in the Anthropic shape and translated at this edge.

use super::http::Provider;
use super::openai::{arguments_input, arguments_text};
use super::{ContentBlock, Message, ModelError, Reply, Request, Role, StopReason};
use serde_json::{json, Map, Value};

/// OpenAI's Responses API (`POST {base}/responses`) for one model.
pub struct Responses {
    /// The model's name, as the server knows it.
    pub model: String,
    /// `max_output_tokens`: the most tokens of one reply, reasoning included.
    pub max_tokens: u32,
    /// The API's root, `/v1` included (`https://api.openai.com/v1`).
    pub base_url: String,
    /// Optional: a local server may need none.
    pub api_key: Option<String>,
    /// The reasoning effort of a reasoning model; None for a model that does not reason,
    /// which is then asked for no reasoning items either.
    pub effort: Option<super::Effort>,
    /// One value for all the requests of a run, so that they share the server's cache.
    pub cache_key: String,
}

impl Responses {
    /// The Responses API of `model` at `base_url`: no reasoning effort, and a cache key no other
    /// run shares.
    pub fn new(model: &str, max_tokens: u32, base_url: &str, api_key: Option<String>) -> Self {
        Responses {
            model: model.to_string(),
            max_tokens,
            base_url: base_url.to_string(),
            api_key,
            effort: None,
            cache_key: new_cache_key(),
        }
    }
}

/// A key no other run shares.
fn new_cache_key() -> String {
    format!("agent-git-{:016x}", super::retry::random_bits())
}

/// One internal message as Responses input items, in the order they happened.
fn translate(message: &Message) -> Vec<Value> {
    match message.role {
        Role::User => {
            // Tool results first, as their own items, then what the harness says.
            let mut items: Vec<Value> = message
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolResult { tool_use_id, content, is_error } => Some(json!({
                        "type": "function_call_output",
                        "call_id": tool_use_id,
                        "output": if *is_error { format!("ERROR: {content}") } else { content.clone() },
                    })),
                    _ => None,
                })
                .collect();
            let texts: Vec<Value> = message
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text { text } if !text.trim().is_empty() => {
                        Some(json!({"type": "input_text", "text": text}))
                    }
                    _ => None,
                })
                .collect();
            if !texts.is_empty() {
                items.push(json!({"type": "message", "role": "user", "content": texts}));
            }
            items
        }
        Role::Assistant => {
            let mut items: Vec<Value> = message.content.iter().filter_map(output_item).collect();
            // A reasoning item must be followed by the item it led to; one a reply ended on
            // (cut off while reasoning) is refused alone.
            while items.last().is_some_and(|i| i["type"] == "reasoning") {
                items.pop();
            }
            items
        }
    }
}

/// An assistant block as the output item it came from.
fn output_item(block: &ContentBlock) -> Option<Value> {
    match block {
        ContentBlock::Text { text } if text.trim().is_empty() => None,
        ContentBlock::Text { text } => Some(json!({
            "type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        })),
        ContentBlock::ToolUse { id, name, input } => Some(json!({
            "type": "function_call", "call_id": id, "name": name,
            "arguments": arguments_text(input),
        })),
        ContentBlock::ToolResult { .. } => None,
        ContentBlock::Other(item) => Some(without_id(item)),
    }
}

/// An item as it came, without its `id`: with `store: false` the server kept nothing an id
/// could name (it refuses an item sent by id alone), and the item's content is all it needs.
fn without_id(item: &Value) -> Value {
    match item {
        Value::Object(fields) => {
            let kept: Map<String, Value> = fields
                .iter()
                .filter(|(key, value)| key.as_str() != "id" && !value.is_null())
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            Value::Object(kept)
        }
        other => other.clone(),
    }
}

/// The blocks of one output item; `refused` is set when the model refused in it.
fn blocks_of(item: &Value, refused: &mut bool) -> Vec<ContentBlock> {
    match item["type"].as_str() {
        Some("message") => {
            let parts = item["content"].as_array().into_iter().flatten();
            parts
                .filter_map(|part| match part["type"].as_str() {
                    Some("output_text") => part["text"].as_str().map(ContentBlock::text),
                    Some("refusal") => {
                        *refused = true;
                        part["refusal"].as_str().map(ContentBlock::text)
                    }
                    _ => None,
                })
                .filter(|b| !matches!(b, ContentBlock::Text { text } if text.trim().is_empty()))
                .collect()
        }
        Some("function_call") => {
            let id = item["call_id"]
                .as_str()
                .or(item["id"].as_str())
                .unwrap_or("")
                .to_string();
            vec![ContentBlock::ToolUse {
                id,
                name: item["name"].as_str().unwrap_or("").to_string(),
                input: arguments_input(&item["arguments"]),
            }]
        }
        // Reasoning items, and items of types added later: kept as they came, sent back.
        _ => vec![ContentBlock::Other(item.clone())],
    }
}

/// Why the reply stopped, from the response's `status` and what it holds.
fn stop_reason(value: &Value, refused: bool, has_calls: bool) -> Result<StopReason, String> {
    let reason = value["incomplete_details"]["reason"].as_str();
    match value["status"].as_str() {
        _ if refused => Ok(StopReason::Refusal),
        // Cut off at the token limit: its function calls may be cut too, and must not run.
        Some("incomplete") if reason == Some("content_filter") => Ok(StopReason::Refusal),
        Some("incomplete") => Ok(StopReason::MaxTokens),
        Some("completed") | None if has_calls => Ok(StopReason::ToolUse),
        Some("completed") | None => Ok(StopReason::EndTurn),
        Some(other) => Err(format!("the response is `{other}`, not completed")),
    }
}

impl Provider for Responses {
    fn name(&self) -> &'static str {
        "openai-responses"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn url(&self) -> String {
        format!("{}/responses", self.base_url.trim_end_matches('/'))
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        super::openai::bearer(&self.api_key)
    }

    /// No temperature is ever sent: reasoning models refuse one.
    fn body(&self, request: &Request<'_>) -> Value {
        let input: Vec<Value> = request.messages.iter().flat_map(translate).collect();
        // Not strict: the tools' schemas have optional fields, which strict mode refuses.
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "name": t.name, "description": t.description,
                       "parameters": t.input_schema, "strict": false})
            })
            .collect();
        let mut body = json!({
            "model": self.model,
            "instructions": request.system,
            "input": input,
            "tools": tools,
            "store": false,
            "max_output_tokens": self.max_tokens,
            "prompt_cache_key": self.cache_key,
        });
        if let Some(effort) = self.effort {
            body["reasoning"] = json!({"effort": effort.name()});
            body["include"] = json!(["reasoning.encrypted_content"]);
        }
        body
    }

    fn streamed(&self, body: &Value) -> Value {
        let mut body = body.clone();
        body["stream"] = json!(true);
        body
    }

    fn parse(&self, body: &str) -> Result<Reply, ModelError> {
        let bad = |what: &str| ModelError::BadResponse(format!("openai-responses: {what}"));
        let value: Value = serde_json::from_str(body).map_err(|e| bad(&e.to_string()))?;
        if !value["error"].is_null() {
            return Err(bad(&super::errors::error_with_success(body)));
        }
        let output = value["output"]
            .as_array()
            .ok_or_else(|| bad("no output in the response"))?;
        let mut refused = false;
        let content: Vec<ContentBlock> = output
            .iter()
            .flat_map(|item| blocks_of(item, &mut refused))
            .collect();
        let has_calls = content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolUse { .. }));
        let stop_reason = stop_reason(&value, refused, has_calls).map_err(|e| bad(&e))?;
        Ok(Reply {
            stop_reason,
            content,
            usage: super::openai::usage_of(&value["usage"], ["input_tokens", "output_tokens"]),
        })
    }

    fn hint(&self, status: u16) -> Option<String> {
        match status {
            401 => Some("check OPENAI_API_KEY".into()),
            404 => Some(format!(
                "check the model name `{}` and OPENAI_BASE_URL; a server without the Responses \
                 API takes openai-chat:{}",
                self.model, self.model
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Usage;
    use crate::model::{Effort, ToolSpec};

    fn provider() -> Responses {
        Responses {
            effort: Some(Effort::Low),
            cache_key: "agent-git-run-1".into(),
            ..Responses::new(
                "gpt-5",
                512,
                "http://127.0.0.1:1/v1/",
                Some("sk-test".into()),
            )
        }
    }

    fn reasoning(id: &str, secret: &str) -> Value {
        json!({"type": "reasoning", "id": id, "summary": [], "encrypted_content": secret})
    }

    #[test]
    fn translates_the_conversation_to_input_items_with_reasoning_before_its_calls() {
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
                    ContentBlock::Other(reasoning("rs_1", "enc-1")),
                    ContentBlock::text("Reading."),
                    ContentBlock::ToolUse {
                        id: "call_1".into(),
                        name: "read_file".into(),
                        input: json!({"path": "a.py"}),
                    },
                    ContentBlock::ToolUse {
                        id: "call_2".into(),
                        name: "read_file".into(),
                        input: json!("{bad"),
                    },
                ],
            },
            Message::user(vec![
                ContentBlock::ToolResult {
                    tool_use_id: "call_1".into(),
                    content: "1\tx".into(),
                    is_error: false,
                },
                ContentBlock::ToolResult {
                    tool_use_id: "call_2".into(),
                    content: "bad input".into(),
                    is_error: true,
                },
                ContentBlock::text("Note: tests fail."),
            ]),
            // Cut off while reasoning: the lone reasoning item cannot go back.
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::text(""),
                    ContentBlock::Other(reasoning("rs_2", "enc-2")),
                ],
            },
        ];
        let body = provider().body(&Request {
            system: "Sys",
            messages: &messages,
            tools: &tools,
        });
        assert_eq!(
            body,
            json!({
                "model": "gpt-5",
                "instructions": "Sys",
                "input": [
                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Task"}]},
                    {"type": "reasoning", "summary": [], "encrypted_content": "enc-1"},
                    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Reading."}]},
                    {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": "{\"path\":\"a.py\"}"},
                    {"type": "function_call", "call_id": "call_2", "name": "read_file", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": "call_1", "output": "1\tx"},
                    {"type": "function_call_output", "call_id": "call_2", "output": "ERROR: bad input"},
                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Note: tests fail."}]}
                ],
                "tools": [{"type": "function", "name": "read_file", "description": "Read.",
                           "parameters": {"type": "object"}, "strict": false}],
                "store": false,
                "max_output_tokens": 512,
                "prompt_cache_key": "agent-git-run-1",
                "reasoning": {"effort": "low"},
                "include": ["reasoning.encrypted_content"]
            })
        );
        assert_eq!(provider().url(), "http://127.0.0.1:1/v1/responses");
        assert_eq!(
            provider().streamed(&json!({"model": "m"})),
            json!({"model": "m", "stream": true})
        );
    }

    #[test]
    fn a_model_that_does_not_reason_is_asked_for_no_reasoning() {
        let plain = Responses {
            cache_key: "k".into(),
            ..Responses::new("gpt-4.1", 100, "http://x/v1", None)
        };
        let body = plain.body(&Request {
            system: "S",
            messages: &[Message::user(vec![ContentBlock::text("T")])],
            tools: &[],
        });
        assert_eq!(
            body,
            json!({"model": "gpt-4.1", "instructions": "S",
                   "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "T"}]}],
                   "tools": [], "store": false, "max_output_tokens": 100, "prompt_cache_key": "k"})
        );
        assert_eq!(plain.headers(), vec![]);
        let a = Responses::new("m", 1, "", None).cache_key;
        let b = Responses::new("m", 1, "", None).cache_key;
        assert!(a.starts_with("agent-git-") && a != b, "{a} {b}");
    }

    #[test]
    fn parses_reasoning_text_calls_and_usage() {
        let body = json!({
            "id": "resp_1", "object": "response", "created_at": 1, "status": "completed",
            "error": null, "incomplete_details": null, "model": "gpt-5-2025-08-07",
            "output": [
                reasoning("rs_1", "enc-1"),
                {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                 "content": [{"type": "output_text", "text": "Reading.", "annotations": [], "logprobs": []}]},
                {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read_file",
                 "arguments": "{\"path\":\"calc.py\"}", "status": "completed"},
                {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "edit_file",
                 "arguments": "{\"path\": oops", "status": "completed"}
            ],
            "usage": {"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 600},
                      "output_tokens": 300, "output_tokens_details": {"reasoning_tokens": 200},
                      "total_tokens": 1300}
        });
        let reply = provider().parse(&body.to_string()).unwrap();
        assert_eq!(
            reply,
            Reply {
                stop_reason: StopReason::ToolUse,
                content: vec![
                    ContentBlock::Other(reasoning("rs_1", "enc-1")),
                    ContentBlock::text("Reading."),
                    ContentBlock::ToolUse {
                        id: "call_1".into(),
                        name: "read_file".into(),
                        input: json!({"path": "calc.py"})
                    },
                    ContentBlock::ToolUse {
                        id: "call_2".into(),
                        name: "edit_file".into(),
                        input: json!("{\"path\": oops")
                    },
                ],
                usage: Usage {
                    input_tokens: 400,
                    output_tokens: 300,
                    cache_creation_input_tokens: 0,
                    cache_read_input_tokens: 600,
                    reasoning_tokens: 200,
                },
            }
        );
    }

    #[test]
    fn maps_statuses_to_stop_reasons_and_refuses_bodies_that_are_no_reply() {
        let reply = |status: &str, details: Value, output: Value| {
            let body = json!({"status": status, "incomplete_details": details, "output": output, "error": null});
            provider().parse(&body.to_string())
        };
        let text = json!([{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]}]);
        let stop = |status, details, output| reply(status, details, output).unwrap().stop_reason;
        assert_eq!(
            stop("completed", Value::Null, text.clone()),
            StopReason::EndTurn
        );
        assert_eq!(
            stop(
                "incomplete",
                json!({"reason": "max_output_tokens"}),
                text.clone()
            ),
            StopReason::MaxTokens
        );
        assert_eq!(
            stop(
                "incomplete",
                json!({"reason": "content_filter"}),
                text.clone()
            ),
            StopReason::Refusal
        );
        let refusal = json!([{"type": "message", "role": "assistant",
            "content": [{"type": "refusal", "refusal": "I can't help with that."}]}]);
        let refused = reply("completed", Value::Null, refusal).unwrap();
        assert_eq!(refused.stop_reason, StopReason::Refusal);
        assert_eq!(refused.text(), "I can't help with that.");
        let cut = json!([{"type": "function_call", "call_id": "c", "name": "write_file",
            "arguments": "{\"path\": \"a.py\", \"content\": \"def", "status": "incomplete"}]);
        assert_eq!(
            stop("incomplete", json!({"reason": "max_output_tokens"}), cut),
            StopReason::MaxTokens,
            "a call cut off at the limit"
        );
        let not_replies = [
            ("{}", "openai-responses: no output in the response"),
            (
                r#"{"status": "in_progress", "output": []}"#,
                "openai-responses: the response is `in_progress`, not completed",
            ),
            (
                r#"{"status": "failed", "output": [], "error": {"code": "server_error", "message": "The model failed."}}"#,
                "openai-responses: an error came with a success status: server_error: The model failed.",
            ),
        ];
        for (body, said) in not_replies {
            let err = provider().parse(body).unwrap_err();
            assert_eq!(err.to_string(), format!("unreadable response: {said}"));
        }
    }
}
