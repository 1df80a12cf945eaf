//! The Responses API stream: output items added, built from their deltas and replaced when
//! done, then the response that ends the stream (`response.completed`, or `.incomplete` when
//! cut off). Assembled into the body the same request returns without `stream`.

use super::stream::{append, bad_event, parse_data, Assembler, StreamError};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Assembles a streamed Responses API reply into the body the same request returns without
/// `stream`.
#[derive(Debug, Default)]
pub struct ResponsesStream {
    /// The output items by `output_index`, as far as they came.
    items: BTreeMap<u64, Value>,
    /// The response of `response.completed` or `response.incomplete`.
    end: Option<Value>,
}

/// Why a `response.failed` or `error` event failed the reply: its code and message.
fn failed(error: &Value, default_kind: &str) -> StreamError {
    let text = |v: &Value| v.as_str().filter(|t| !t.is_empty()).map(str::to_string);
    StreamError::Server {
        kind: text(&error["code"])
            .or_else(|| text(&error["type"]).filter(|t| t != "error"))
            .unwrap_or_else(|| default_kind.to_string()),
        message: text(&error["message"]).unwrap_or_default(),
    }
}

impl ResponsesStream {
    fn item(&mut self, event: &str, value: &Value) -> Result<&mut Value, StreamError> {
        let index = value["output_index"]
            .as_u64()
            .ok_or_else(|| bad_event(event, "it has no output_index"))?;
        self.items
            .get_mut(&index)
            .ok_or_else(|| bad_event(event, &format!("output item {index} was never added")))
    }

    /// Puts an item at its index: a new one, or the whole item that replaces its pieces.
    fn put(&mut self, event: &str, mut value: Value) -> Result<(), StreamError> {
        let index = value["output_index"]
            .as_u64()
            .ok_or_else(|| bad_event(event, "it has no output_index"))?;
        match value.get_mut("item").map(Value::take) {
            Some(item @ Value::Object(_)) => {
                self.items.insert(index, item);
                Ok(())
            }
            _ => Err(bad_event(event, "it holds no item object")),
        }
    }

    /// The content part a text delta continues, made when no `content_part.added` came.
    fn part<'a>(item: &'a mut Value, value: &Value, kind: &str) -> Option<&'a mut Value> {
        let index = usize::try_from(value["content_index"].as_u64().unwrap_or(0)).ok()?;
        let object = item.as_object_mut()?;
        let parts = object.entry("content").or_insert_with(|| json!([]));
        let parts = parts.as_array_mut()?;
        while parts.len() <= index {
            parts.push(json!({"type": kind}));
        }
        parts.get_mut(index)
    }

    /// A piece of an item's text: the message's text or refusal, or a call's arguments.
    fn apply_delta(&mut self, event: &str, value: &Value) -> Result<Option<String>, StreamError> {
        let piece = value["delta"].as_str().unwrap_or("");
        let item = self.item(event, value)?;
        let (kind, field) = match event {
            "response.function_call_arguments.delta" => {
                if let Some(object) = item.as_object_mut() {
                    append(object, "arguments", piece);
                }
                return Ok(None);
            }
            "response.refusal.delta" => ("refusal", "refusal"),
            _ => ("output_text", "text"),
        };
        if let Some(Value::Object(part)) = Self::part(item, value, kind) {
            append(part, field, piece);
        }
        Ok((!piece.is_empty()).then(|| piece.to_string()))
    }

    fn add_part(&mut self, event: &str, value: &Value) -> Result<(), StreamError> {
        let kind = value["part"]["type"].as_str().unwrap_or("output_text");
        let item = self.item(event, value)?;
        if let Some(part) = Self::part(item, value, kind) {
            *part = value["part"].clone();
        }
        Ok(())
    }
}

impl Assembler for ResponsesStream {
    fn push(&mut self, event: &str, data: &str) -> Result<Option<String>, StreamError> {
        if self.end.is_some() {
            return Ok(None);
        }
        let mut value = parse_data(event, data)?;
        // The data names its own type; proxies that drop `event:` lines keep it.
        let kind = value["type"].as_str().unwrap_or(event).to_string();
        match kind.as_str() {
            "response.output_item.added" | "response.output_item.done" => self.put(&kind, value)?,
            "response.content_part.added" => self.add_part(&kind, &value)?,
            "response.output_text.delta"
            | "response.refusal.delta"
            | "response.function_call_arguments.delta" => return self.apply_delta(&kind, &value),
            "response.completed" | "response.incomplete" => {
                match value.get_mut("response").map(Value::take) {
                    Some(response @ Value::Object(_)) => self.end = Some(response),
                    _ => return Err(bad_event(&kind, "it holds no response object")),
                }
            }
            "response.failed" => return Err(failed(&value["response"]["error"], &kind)),
            // OpenAI puts the code and message beside `type`; some proxies nest an `error`.
            "error" if value["error"].is_object() => return Err(failed(&value["error"], "error")),
            "error" => return Err(failed(&value, "error")),
            // `response.created`, `.in_progress`, the `.done` of a text or of arguments
            // (the item's own `.done` carries them whole), reasoning summaries, and event
            // types the API adds later.
            _ => {}
        }
        Ok(None)
    }

    fn is_done(&self) -> bool {
        self.end.is_some()
    }

    /// The final response, holding the items as they streamed; its own `output` where no
    /// item came as an event.
    fn finish(self) -> Result<Value, StreamError> {
        let Some(mut response) = self.end else {
            return Err(StreamError::EndedEarly {
                missing: "response.completed",
            });
        };
        if !self.items.is_empty() {
            response["output"] = self.items.into_values().collect();
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Provider, Responses};

    type Events = Vec<(&'static str, Value)>;

    fn assemble(events: &Events) -> (Result<Value, StreamError>, Vec<String>) {
        let mut stream = ResponsesStream::default();
        let mut shown = Vec::new();
        for (name, data) in events {
            match stream.push(name, &data.to_string()) {
                Ok(Some(text)) => shown.push(text),
                Ok(None) => {}
                Err(e) => return (Err(e), shown),
            }
        }
        (stream.finish(), shown)
    }

    fn provider() -> Responses {
        Responses::new("gpt-5", 4096, "http://127.0.0.1:1/v1", None)
    }

    fn reasoning() -> Value {
        json!({"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAAA-1"})
    }

    fn message() -> Value {
        json!({"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
               "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": "Reading calc.py."}]})
    }

    fn call() -> Value {
        json!({"id": "fc_1", "type": "function_call", "status": "completed",
               "arguments": "{\"path\":\"calc.py\"}", "call_id": "call_1", "name": "read_file"})
    }

    fn whole(status: &str, output: Vec<Value>) -> Value {
        json!({"id": "resp_1", "object": "response", "created_at": 1761000000, "status": status,
               "error": null, "incomplete_details": null, "model": "gpt-5-2025-08-07",
               "output": output,
               "usage": {"input_tokens": 900, "input_tokens_details": {"cached_tokens": 500},
                         "output_tokens": 120, "output_tokens_details": {"reasoning_tokens": 64},
                         "total_tokens": 1020}})
    }

    /// The events OpenAI sends for `whole`: each item added empty, its text or arguments in
    /// deltas, done whole; the final response carries the output too.
    fn events() -> Events {
        let mut created = whole("in_progress", vec![]);
        created["usage"] = Value::Null;
        let mut empty_message = message();
        empty_message["content"] = json!([]);
        empty_message["status"] = json!("in_progress");
        let mut empty_call = call();
        empty_call["arguments"] = json!("");
        empty_call["status"] = json!("in_progress");
        let seq = |mut v: Value, n: u64| {
            v["sequence_number"] = json!(n);
            v
        };
        vec![
            (
                "response.created",
                seq(
                    json!({"type": "response.created", "response": created.clone()}),
                    0,
                ),
            ),
            (
                "response.in_progress",
                seq(
                    json!({"type": "response.in_progress", "response": created}),
                    1,
                ),
            ),
            (
                "response.output_item.added",
                seq(
                    json!({"type": "response.output_item.added", "output_index": 0, "item": reasoning()}),
                    2,
                ),
            ),
            (
                "response.output_item.done",
                seq(
                    json!({"type": "response.output_item.done", "output_index": 0, "item": reasoning()}),
                    3,
                ),
            ),
            (
                "response.output_item.added",
                seq(
                    json!({"type": "response.output_item.added", "output_index": 1, "item": empty_message}),
                    4,
                ),
            ),
            (
                "response.content_part.added",
                seq(
                    json!({"type": "response.content_part.added", "item_id": "msg_1", "output_index": 1, "content_index": 0,
                "part": {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}}),
                    5,
                ),
            ),
            (
                "response.output_text.delta",
                seq(
                    json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1, "content_index": 0, "delta": "Reading", "logprobs": []}),
                    6,
                ),
            ),
            (
                "response.output_text.delta",
                seq(
                    json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1, "content_index": 0, "delta": " calc.py.", "logprobs": []}),
                    7,
                ),
            ),
            (
                "response.output_text.done",
                seq(
                    json!({"type": "response.output_text.done", "item_id": "msg_1", "output_index": 1, "content_index": 0, "text": "Reading calc.py.", "logprobs": []}),
                    8,
                ),
            ),
            (
                "response.output_item.done",
                seq(
                    json!({"type": "response.output_item.done", "output_index": 1, "item": message()}),
                    9,
                ),
            ),
            (
                "response.output_item.added",
                seq(
                    json!({"type": "response.output_item.added", "output_index": 2, "item": empty_call}),
                    10,
                ),
            ),
            (
                "response.function_call_arguments.delta",
                seq(
                    json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 2, "delta": "{\"path\":"}),
                    11,
                ),
            ),
            (
                "response.function_call_arguments.delta",
                seq(
                    json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 2, "delta": "\"calc.py\"}"}),
                    12,
                ),
            ),
            (
                "response.function_call_arguments.done",
                seq(
                    json!({"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 2, "arguments": "{\"path\":\"calc.py\"}"}),
                    13,
                ),
            ),
            (
                "response.output_item.done",
                seq(
                    json!({"type": "response.output_item.done", "output_index": 2, "item": call()}),
                    14,
                ),
            ),
            (
                "response.completed",
                seq(
                    json!({"type": "response.completed", "response": whole("completed", vec![reasoning(), message(), call()])}),
                    15,
                ),
            ),
        ]
    }

    #[test]
    fn a_responses_stream_gives_the_reply_of_the_whole_body() {
        let (body, shown) = assemble(&events());
        let whole = whole("completed", vec![reasoning(), message(), call()]);
        assert_eq!(body.unwrap(), whole);
        assert_eq!(shown, ["Reading", " calc.py."]);
        // Items that never came done are built from their deltas; a final response without
        // its output (some servers) takes the streamed items.
        let built: Events = events()
            .into_iter()
            .filter(|(name, v)| !(*name == "response.output_item.done" && v["output_index"] != 0))
            .map(|(name, mut v)| {
                if name == "response.completed" {
                    v["response"]["output"] = json!([]);
                }
                (name, v)
            })
            .collect();
        let (body, _) = assemble(&built);
        assert_eq!(
            provider().parse(&body.unwrap().to_string()).unwrap(),
            provider().parse(&whole.to_string()).unwrap()
        );
    }

    #[test]
    fn a_reply_cut_at_the_limit_ends_with_response_incomplete() {
        let mut events = events()[..13].to_vec();
        let mut cut = whole("incomplete", vec![]);
        cut["incomplete_details"] = json!({"reason": "max_output_tokens"});
        events.push((
            "response.incomplete",
            json!({"type": "response.incomplete", "response": cut}),
        ));
        let (body, _) = assemble(&events);
        let reply = provider().parse(&body.unwrap().to_string()).unwrap();
        assert_eq!(reply.stop_reason, crate::model::StopReason::MaxTokens);
        assert_eq!(reply.content.len(), 3, "{:?}", reply.content);
    }

    #[test]
    fn failures_say_what_the_server_said_and_an_unended_stream_is_no_reply() {
        let (result, _) = assemble(&events()[..12].to_vec());
        assert_eq!(
            result.unwrap_err().to_string(),
            "the stream ended before the reply was complete (no response.completed arrived)"
        );
        let mut failed = events()[..3].to_vec();
        let mut response = whole("failed", vec![]);
        response["error"] = json!({"code": "context_length_exceeded",
            "message": "Your input exceeds the context window of this model."});
        failed.push((
            "response.failed",
            json!({"type": "response.failed", "response": response}),
        ));
        let (result, _) = assemble(&failed);
        assert_eq!(
            result.unwrap_err().to_string(),
            "the server sent an error in the stream: context_length_exceeded: Your input \
             exceeds the context window of this model."
        );
        let error = vec![(
            "error",
            json!({"type": "error", "code": "server_error", "message": "Try again.", "param": null, "sequence_number": 1}),
        )];
        let (result, _) = assemble(&error);
        assert_eq!(
            result.unwrap_err().to_string(),
            "the server sent an error in the stream: server_error: Try again."
        );
        let nested = vec![(
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Busy."}}),
        )];
        let (result, _) = assemble(&nested);
        assert_eq!(
            result.unwrap_err().to_string(),
            "the server sent an error in the stream: overloaded_error: Busy."
        );
        let orphan = vec![(
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "output_index": 4, "delta": "x"}),
        )];
        let (result, _) = assemble(&orphan);
        assert!(result
            .unwrap_err()
            .to_string()
            .contains("output item 4 was never added"));
    }
}
