//! Streamed replies. The server-sent events of a streamed response are assembled into the
//! body the same request would have returned without `stream`, so `Provider::parse` reads
//! both alike and a recording stores the assembled body.

use bytes::Buf;
use futures_util::{Stream, StreamExt};
use serde_json::{json, Map, Value};
use sse_stream::SseByteStream;
use std::fmt;

/// Why a stream gave no reply.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// The server reported an error inside the stream, e.g. `overloaded_error`.
    #[error("the server sent an error in the stream: {kind}: {message}")]
    Server {
        /// The error's type or code (`overloaded_error`).
        kind: String,
        /// What the server said of it.
        message: String,
    },
    /// The stream closed cleanly, but before the event that ends a reply.
    #[error("the stream ended before the reply was complete (no {missing} arrived)")]
    EndedEarly {
        /// The event that never came (`message_stop`).
        missing: &'static str,
    },
    /// The connection failed while the body was being read.
    #[error("the connection broke while the reply was streaming: {0}")]
    Broken(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The bytes were not a readable event stream (invalid UTF-8 in a field).
    #[error("the reply stream could not be decoded: {0}")]
    Undecodable(String),
    /// An event's data was not the JSON its type promises.
    #[error("unreadable `{event}` event in the reply stream: {reason}")]
    BadEvent {
        /// The event's type.
        event: String,
        /// Why its data could not be read.
        reason: String,
    },
}

/// A failed stream, and whether any event had arrived before it failed: a stream that fails
/// before its first event is a failed request; one that fails after it lost part of a reply.
#[derive(Debug)]
pub struct StreamFailure {
    /// Some event had arrived before the failure: part of a reply was lost.
    pub events_arrived: bool,
    /// Why the stream failed.
    pub error: StreamError,
}

impl StreamFailure {
    /// The stream stopped before the reply's end without the server saying why.
    pub fn ended_early(&self) -> bool {
        matches!(
            self.error,
            StreamError::EndedEarly { .. } | StreamError::Broken(_)
        )
    }
}

impl fmt::Display for StreamFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let when = if self.events_arrived {
            "after events had arrived"
        } else {
            "before any event arrived"
        };
        write!(f, "{} ({when})", self.error)
    }
}

impl std::error::Error for StreamFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// Builds one API's non-streamed response body from its stream, one event at a time.
pub trait Assembler: Send {
    /// Takes one event (its name, `message` when it had none, and its data); returns the
    /// reply text it carried, to show the user as it arrives.
    fn push(&mut self, event: &str, data: &str) -> Result<Option<String>, StreamError>;
    /// The server marked the end of the stream: nothing after it belongs to the reply.
    fn is_done(&self) -> bool;
    /// The body the non-streamed call would have returned; an error if the reply is not whole.
    fn finish(self) -> Result<Value, StreamError>
    where
        Self: Sized;
}

/// Reads a streamed response body, feeds its events to `assembler`, calls `on_text` with each
/// piece of reply text in order, and returns the assembled body.
pub async fn read_stream<A, S, B, E>(
    mut assembler: A,
    bytes: S,
    on_text: &mut (dyn FnMut(&str) + Send),
) -> Result<Value, StreamFailure>
where
    A: Assembler,
    S: Stream<Item = Result<B, E>>,
    B: Buf,
    E: std::error::Error + Send + Sync + 'static,
{
    let mut events = std::pin::pin!(SseByteStream::new(bytes));
    let mut events_arrived = false;
    let fail = |events_arrived, error| StreamFailure {
        events_arrived,
        error,
    };
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| fail(events_arrived, decoding_error(e)))?;
        // A block without data (a lone `retry:` or `id:`) is no event, as in a browser.
        let Some(data) = event.data else { continue };
        // An event that is itself the failure (an error as the stream's only event) is no
        // part of a reply that arrived before it.
        let before = events_arrived;
        events_arrived = true;
        let name = event.event.as_deref().unwrap_or("message");
        if let Some(text) = assembler.push(name, &data).map_err(|e| fail(before, e))? {
            on_text(&text);
        }
        if assembler.is_done() {
            break;
        }
    }
    assembler.finish().map_err(|e| fail(events_arrived, e))
}

fn decoding_error(error: sse_stream::Error) -> StreamError {
    match error {
        sse_stream::Error::Body(source) => StreamError::Broken(source),
        other => StreamError::Undecodable(other.to_string()),
    }
}

pub(super) fn parse_data(event: &str, data: &str) -> Result<Value, StreamError> {
    serde_json::from_str(data).map_err(|e| bad_event(event, &e.to_string()))
}

pub(super) fn bad_event(event: &str, reason: &str) -> StreamError {
    StreamError::BadEvent {
        event: event.to_string(),
        reason: reason.to_string(),
    }
}

/// An error object in either API's shape (`type` or `code`, and `message`), or a bare string.
fn server_error(error: &Value) -> StreamError {
    let text = |value: &Value| match value {
        Value::Null => None,
        Value::String(text) => Some(text.clone()),
        other => Some(other.to_string()),
    };
    StreamError::Server {
        kind: text(&error["type"])
            .or_else(|| text(&error["code"]))
            .unwrap_or_else(|| "error".to_string()),
        message: text(&error["message"])
            .or_else(|| text(error))
            .unwrap_or_default(),
    }
}

/// Appends a piece to a string field of a JSON object, creating the field if needed.
pub(super) fn append(object: &mut Map<String, Value>, key: &str, piece: &str) {
    match object.get_mut(key) {
        Some(Value::String(text)) => text.push_str(piece),
        _ => {
            object.insert(key.to_string(), Value::String(piece.to_string()));
        }
    }
}

/// The Anthropic Messages stream: `message_start`, content blocks built from their deltas,
/// `message_delta`, `message_stop`.
#[derive(Debug, Default)]
pub struct AnthropicStream {
    message: Option<Map<String, Value>>,
    blocks: Vec<Block>,
    stopped: bool,
}

#[derive(Debug)]
struct Block {
    index: u64,
    value: Map<String, Value>,
    /// The `input_json_delta` pieces so far; None when none arrived.
    input_json: Option<String>,
}

impl Block {
    /// Tool input streams as JSON text, whole only at the block's end.
    fn close(&mut self) {
        let Some(raw) = self.input_json.take() else {
            return;
        };
        let input = if raw.trim().is_empty() {
            json!({})
        } else {
            // Cut short (max_tokens), it stays text: the tool layer answers it, not a crash.
            serde_json::from_str(&raw).unwrap_or(Value::String(raw))
        };
        self.value.insert("input".to_string(), input);
    }
}

impl AnthropicStream {
    fn start_message(&mut self, mut event: Value) -> Result<(), StreamError> {
        match event.get_mut("message").map(Value::take) {
            Some(Value::Object(message)) => {
                self.message = Some(message);
                Ok(())
            }
            _ => Err(bad_event("message_start", "it holds no message object")),
        }
    }

    fn start_block(&mut self, mut event: Value) -> Result<(), StreamError> {
        let index = block_index("content_block_start", &event)?;
        let Some(Value::Object(value)) = event.get_mut("content_block").map(Value::take) else {
            return Err(bad_event(
                "content_block_start",
                "it holds no content_block object",
            ));
        };
        self.blocks.push(Block {
            index,
            value,
            input_json: None,
        });
        Ok(())
    }

    fn block(&mut self, event: &str, index: u64) -> Result<&mut Block, StreamError> {
        self.blocks
            .iter_mut()
            .rfind(|block| block.index == index)
            .ok_or_else(|| bad_event(event, &format!("block {index} never started")))
    }

    /// Applies a block delta; returns the reply text it carried.
    fn apply_delta(&mut self, event: &Value) -> Result<Option<String>, StreamError> {
        let index = block_index("content_block_delta", event)?;
        let block = self.block("content_block_delta", index)?;
        let delta = &event["delta"];
        let piece = |key: &str| delta[key].as_str().unwrap_or("");
        match delta["type"].as_str() {
            Some("text_delta") => {
                let text = piece("text");
                append(&mut block.value, "text", text);
                return Ok((!text.is_empty()).then(|| text.to_string()));
            }
            Some("input_json_delta") => block
                .input_json
                .get_or_insert_with(String::new)
                .push_str(piece("partial_json")),
            Some("thinking_delta") => append(&mut block.value, "thinking", piece("thinking")),
            Some("signature_delta") => append(&mut block.value, "signature", piece("signature")),
            Some("citations_delta") => push_citation(&mut block.value, &delta["citation"]),
            // Delta types added to the API later change nothing agent-git reads.
            _ => {}
        }
        Ok(None)
    }

    fn stop_block(&mut self, event: &Value) -> Result<(), StreamError> {
        let index = block_index("content_block_stop", event)?;
        self.block("content_block_stop", index)?.close();
        Ok(())
    }

    /// Top-level changes to the message: stop reason and sequence, and cumulative usage
    /// counts that replace those of `message_start`.
    fn apply_message_delta(&mut self, event: Value) -> Result<(), StreamError> {
        let Some(message) = self.message.as_mut() else {
            return Err(bad_event("message_delta", "it came before message_start"));
        };
        let Value::Object(fields) = event else {
            return Err(bad_event("message_delta", "it is not a JSON object"));
        };
        for (key, value) in fields {
            match (key.as_str(), value) {
                ("type", _) => {}
                ("delta", Value::Object(delta)) => message.extend(delta),
                ("usage", Value::Object(usage)) => {
                    let counts = message.entry("usage").or_insert_with(|| json!({}));
                    if let Some(counts) = counts.as_object_mut() {
                        counts.extend(usage.into_iter().filter(|(_, n)| !n.is_null()));
                    }
                }
                // Other fields (context_management) are top-level fields of the message too.
                (_, value) => {
                    message.insert(key, value);
                }
            }
        }
        Ok(())
    }
}

fn block_index(event: &str, value: &Value) -> Result<u64, StreamError> {
    value["index"]
        .as_u64()
        .ok_or_else(|| bad_event(event, "it has no block index"))
}

fn push_citation(block: &mut Map<String, Value>, citation: &Value) {
    let citations = block.entry("citations").or_insert_with(|| json!([]));
    if let Some(list) = citations.as_array_mut() {
        list.push(citation.clone());
    } else {
        *citations = json!([citation]);
    }
}

impl Assembler for AnthropicStream {
    fn push(&mut self, event: &str, data: &str) -> Result<Option<String>, StreamError> {
        if self.stopped {
            return Ok(None);
        }
        let value = parse_data(event, data)?;
        // The data names its own type; proxies that drop `event:` lines keep it.
        let kind = value["type"].as_str().unwrap_or(event).to_string();
        match kind.as_str() {
            "message_start" => self.start_message(value)?,
            "content_block_start" => self.start_block(value)?,
            "content_block_delta" => return self.apply_delta(&value),
            "content_block_stop" => self.stop_block(&value)?,
            "message_delta" => self.apply_message_delta(value)?,
            "message_stop" => self.stopped = true,
            "error" => return Err(server_error(&value["error"])),
            // `ping`, and event types the API adds later.
            _ => {}
        }
        Ok(None)
    }

    fn is_done(&self) -> bool {
        self.stopped
    }

    fn finish(self) -> Result<Value, StreamError> {
        let Some(mut message) = self.message else {
            return Err(StreamError::EndedEarly {
                missing: "message_start",
            });
        };
        if !self.stopped {
            return Err(StreamError::EndedEarly {
                missing: "message_stop",
            });
        }
        let mut blocks = self.blocks;
        blocks.sort_by_key(|block| block.index);
        let content = blocks.into_iter().map(|mut block| {
            block.close();
            Value::Object(block.value)
        });
        message.insert("content".to_string(), content.collect());
        Ok(Value::Object(message))
    }
}

/// The OpenAI Chat Completions stream (`chat.completion.chunk`), as OpenAI and the local
/// servers that copy it (Ollama, vLLM, llama.cpp) send it.
#[derive(Debug, Default)]
pub struct OpenAiStream {
    /// `id`, `created`, `model`, `system_fingerprint`: the same on every chunk.
    head: Map<String, Value>,
    content: Option<String>,
    refusal: Option<String>,
    calls: Vec<ToolCall>,
    finish_reason: Option<String>,
    usage: Option<Value>,
    done: bool,
}

#[derive(Debug)]
struct ToolCall {
    index: Option<u64>,
    id: String,
    kind: String,
    name: String,
    /// A JSON text built from pieces, or the object a server sent whole.
    arguments: Value,
}

impl ToolCall {
    fn new(index: Option<u64>) -> Self {
        ToolCall {
            index,
            id: String::new(),
            kind: "function".to_string(),
            name: String::new(),
            arguments: Value::String(String::new()),
        }
    }

    fn into_value(self) -> Value {
        json!({
            "id": self.id,
            "type": self.kind,
            "function": {"name": self.name, "arguments": self.arguments},
        })
    }
}

impl OpenAiStream {
    fn keep_head(&mut self, chunk: &Value) {
        for key in ["id", "created", "model", "system_fingerprint"] {
            match &chunk[key] {
                Value::Null => {}
                value => {
                    self.head.entry(key).or_insert_with(|| value.clone());
                }
            }
        }
    }

    /// Applies the delta of a choice; returns the reply text it carried.
    fn apply_choice(&mut self, choice: &Value) -> String {
        let delta = &choice["delta"];
        let mut shown = String::new();
        if let Some(text) = delta["content"].as_str() {
            self.content.get_or_insert_with(String::new).push_str(text);
            shown.push_str(text);
        }
        if let Some(text) = delta["refusal"].as_str() {
            self.refusal.get_or_insert_with(String::new).push_str(text);
            shown.push_str(text);
        }
        for piece in delta["tool_calls"].as_array().into_iter().flatten() {
            self.apply_call(piece);
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish_reason = Some(reason.to_string());
        }
        shown
    }

    /// Which call a piece continues. OpenAI numbers calls by `index`; servers that omit it
    /// start a call with an `id` and continue the last one otherwise. A new `id` at a known
    /// index is a new call: some servers number every call 0.
    fn call_for(&mut self, index: Option<u64>, id: Option<&str>) -> &mut ToolCall {
        let found = match index {
            Some(index) => self.calls.iter().rposition(|call| {
                call.index == Some(index)
                    && (call.id.is_empty() || id.is_none_or(|id| id == call.id))
            }),
            None if id.is_some() => None,
            None => self.calls.len().checked_sub(1),
        };
        let position = found.unwrap_or_else(|| {
            self.calls.push(ToolCall::new(index));
            self.calls.len() - 1
        });
        &mut self.calls[position]
    }

    fn apply_call(&mut self, piece: &Value) {
        let id = piece["id"].as_str().filter(|id| !id.is_empty());
        let call = self.call_for(piece["index"].as_u64(), id);
        if let (Some(id), true) = (id, call.id.is_empty()) {
            call.id = id.to_string();
        }
        if let Some(kind) = piece["type"].as_str() {
            call.kind = kind.to_string();
        }
        let function = &piece["function"];
        if let (Some(name), true) = (function["name"].as_str(), call.name.is_empty()) {
            call.name = name.to_string();
        }
        match (&mut call.arguments, &function["arguments"]) {
            (_, Value::Null) => {}
            (Value::String(all), Value::String(part)) => all.push_str(part),
            (arguments, whole) => *arguments = whole.clone(),
        }
    }
}

impl Assembler for OpenAiStream {
    fn push(&mut self, _event: &str, data: &str) -> Result<Option<String>, StreamError> {
        if self.done {
            return Ok(None);
        }
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(None);
        }
        let chunk = parse_data("chat.completion.chunk", data)?;
        match &chunk["error"] {
            Value::Null if chunk["object"] == "error" => return Err(server_error(&chunk)),
            Value::Null => {}
            error => return Err(server_error(error)),
        }
        self.keep_head(&chunk);
        if chunk["usage"].is_object() {
            self.usage = Some(chunk["usage"].clone());
        }
        let mut shown = String::new();
        for choice in chunk["choices"].as_array().into_iter().flatten() {
            // One reply is asked for; a choice with another index would be another reply.
            if choice["index"].as_u64().unwrap_or(0) == 0 {
                shown.push_str(&self.apply_choice(choice));
            }
        }
        Ok((!shown.is_empty()).then_some(shown))
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn finish(self) -> Result<Value, StreamError> {
        let Some(finish_reason) = self.finish_reason else {
            return Err(StreamError::EndedEarly {
                missing: "finish_reason",
            });
        };
        let mut message =
            json!({"role": "assistant", "content": self.content, "refusal": self.refusal});
        if !self.calls.is_empty() {
            let calls: Vec<Value> = self.calls.into_iter().map(ToolCall::into_value).collect();
            message["tool_calls"] = Value::Array(calls);
        }
        let mut body = self.head;
        body.insert("object".to_string(), json!("chat.completion"));
        body.insert(
            "choices".to_string(),
            json!([{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason}]),
        );
        body.insert("usage".to_string(), self.usage.unwrap_or(Value::Null));
        Ok(Value::Object(body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Anthropic, ContentBlock, OpenAi, Provider, Reply, StopReason};
    use bytes::Bytes;

    type Events = Vec<(&'static str, String)>;

    fn anthropic() -> Anthropic {
        Anthropic {
            model: "claude-sonnet-4-5".into(),
            max_tokens: 4096,
            base_url: "http://127.0.0.1:1".into(),
            api_key: String::new(),
            reasoning: Default::default(),
        }
    }

    fn openai() -> OpenAi {
        OpenAi::new("gpt-4o", 4096, "http://127.0.0.1:1/v1", None)
    }

    /// Feeds events to an assembler the way `read_stream` does, collecting the shown text.
    fn assemble<A: Assembler>(mut assembler: A, events: &Events) -> (Value, Vec<String>) {
        let mut shown = Vec::new();
        for (name, data) in events {
            if let Some(text) = assembler.push(name, data).unwrap() {
                shown.push(text);
            }
        }
        (assembler.finish().unwrap(), shown)
    }

    /// The events as a server writes them; an empty name writes no `event:` line.
    fn sse_text(events: &Events, newline: &str) -> String {
        events
            .iter()
            .map(|(name, data)| match *name {
                "" => format!("data: {data}{newline}{newline}"),
                name => format!("event: {name}{newline}data: {data}{newline}{newline}"),
            })
            .collect()
    }

    fn byte_stream(
        text: &str,
        size: usize,
    ) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send {
        let chunks: Vec<_> = text
            .as_bytes()
            .chunks(size)
            .map(|chunk| Ok(Bytes::copy_from_slice(chunk)))
            .collect();
        futures_util::stream::iter(chunks)
    }

    async fn read<A: Assembler>(
        assembler: A,
        bytes: impl Stream<Item = Result<Bytes, std::io::Error>> + Send,
    ) -> (Result<Value, StreamFailure>, Vec<String>) {
        let mut shown = Vec::new();
        let result = read_stream(assembler, bytes, &mut |text| shown.push(text.to_string())).await;
        (result, shown)
    }

    /// Thinking with its signature, a redacted block, text, a tool call whose input arrives in
    /// pieces and one without input, as the Messages API streams them.
    fn anthropic_events() -> Events {
        let delta = |index: u32, delta: Value| {
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": delta}).to_string(),
            )
        };
        let start = |index: u32, block: Value| {
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": block})
                    .to_string(),
            )
        };
        let stop = |index: u32| {
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}).to_string(),
            )
        };
        vec![
            ("message_start", r#"{"type":"message_start","message":{"id":"msg_01XqT","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1203,"cache_creation_input_tokens":0,"cache_read_input_tokens":4096,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":4,"service_tier":"standard"}}}"#.to_string()),
            start(0, json!({"type": "thinking", "thinking": "", "signature": ""})),
            ("ping", r#"{"type": "ping"}"#.to_string()),
            delta(0, json!({"type": "thinking_delta", "thinking": "The test expects divide() to raise"})),
            delta(0, json!({"type": "thinking_delta", "thinking": " on zero — read calc.py first."})),
            delta(0, json!({"type": "signature_delta", "signature": "EqQBCkgIARABGAIiQL2vSig"})),
            stop(0),
            start(1, json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"})),
            stop(1),
            start(2, json!({"type": "text", "text": ""})),
            delta(2, json!({"type": "text_delta", "text": "Je lis calc.py"})),
            delta(2, json!({"type": "text_delta", "text": " et lance les tests — ✓ d'abord."})),
            stop(2),
            start(3, json!({"type": "tool_use", "id": "toolu_01A", "name": "read_file", "input": {}})),
            delta(3, json!({"type": "input_json_delta", "partial_json": ""})),
            delta(3, json!({"type": "input_json_delta", "partial_json": "{\"path\": \"cal"})),
            delta(3, json!({"type": "input_json_delta", "partial_json": "c.py\"}"})),
            stop(3),
            start(4, json!({"type": "tool_use", "id": "toolu_01B", "name": "run_tests", "input": {}})),
            delta(4, json!({"type": "input_json_delta", "partial_json": ""})),
            stop(4),
            ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":1203,"cache_creation_input_tokens":0,"cache_read_input_tokens":4096,"output_tokens":187}}"#.to_string()),
            ("message_stop", r#"{"type":"message_stop"}"#.to_string()),
        ]
    }

    #[test]
    fn an_anthropic_stream_assembles_into_the_non_streamed_body() {
        let non_streamed = json!({
            "id": "msg_01XqT", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [
                {"type": "thinking", "thinking": "The test expects divide() to raise on zero — read calc.py first.", "signature": "EqQBCkgIARABGAIiQL2vSig"},
                {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
                {"type": "text", "text": "Je lis calc.py et lance les tests — ✓ d'abord."},
                {"type": "tool_use", "id": "toolu_01A", "name": "read_file", "input": {"path": "calc.py"}},
                {"type": "tool_use", "id": "toolu_01B", "name": "run_tests", "input": {}}
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 1203, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 4096,
                      "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
                      "output_tokens": 187, "service_tier": "standard"}
        });
        let (body, shown) = assemble(AnthropicStream::default(), &anthropic_events());
        assert_eq!(body, non_streamed);
        let reply: Reply = anthropic().parse(&body.to_string()).unwrap();
        assert_eq!(reply, anthropic().parse(&non_streamed.to_string()).unwrap());
        assert_eq!(
            shown,
            ["Je lis calc.py", " et lance les tests — ✓ d'abord."]
        );
    }

    #[test]
    fn anthropic_ignores_unknown_events_and_keeps_counts_the_delta_leaves_out() {
        let events: Events = vec![
            ("message_start", r#"{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"cache_read_input_tokens":7,"output_tokens":1}}}"#.into()),
            ("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#.into()),
            ("something_new", r#"{"type":"something_new","detail":1}"#.into()),
            ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Done."}}"#.into()),
            ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#.into()),
            ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":null,"output_tokens":9}}"#.into()),
            ("message_stop", r#"{"type":"message_stop"}"#.into()),
        ];
        let (body, _) = assemble(AnthropicStream::default(), &events);
        assert_eq!(
            body["usage"],
            json!({"input_tokens": 10, "cache_read_input_tokens": 7, "output_tokens": 9})
        );
        assert_eq!(body["content"], json!([{"type": "text", "text": "Done."}]));
        assert_eq!(body["stop_reason"], "end_turn");
    }

    /// The fields every chunk of one OpenAI completion repeats.
    fn chunk(choices: Value, usage: Value) -> (&'static str, String) {
        let chunk = json!({
            "id": "chatcmpl-B9xKq", "object": "chat.completion.chunk", "created": 1761000000,
            "model": "gpt-4o-2024-08-06", "service_tier": "default", "system_fingerprint": "fp_07871e2ad8",
            "choices": choices, "usage": usage,
        });
        ("", chunk.to_string())
    }

    fn delta(delta: Value) -> (&'static str, String) {
        chunk(
            json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]),
            Value::Null,
        )
    }

    fn call(index: u32, id: &str, name: &str) -> (&'static str, String) {
        delta(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
        )
    }

    fn arguments(index: u32, piece: &str) -> (&'static str, String) {
        delta(json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    }

    /// Text, then two parallel tool calls, the finish reason, the usage chunk and `[DONE]`.
    fn openai_events() -> Events {
        vec![
            delta(json!({"role": "assistant", "content": "", "refusal": null})),
            delta(json!({"content": "Reading both"})),
            delta(json!({"content": " files…"})),
            call(0, "call_Qx1", "read_file"),
            arguments(0, "{\"pa"),
            arguments(0, "th\": \"calc.py\"}"),
            call(1, "call_Qx2", "read_file"),
            arguments(1, "{\"path\": \"test_"),
            arguments(1, "calc.py\"}"),
            chunk(
                json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": "tool_calls"}]),
                Value::Null,
            ),
            chunk(
                json!([]),
                json!({"prompt_tokens": 812, "completion_tokens": 64, "total_tokens": 876,
                "prompt_tokens_details": {"cached_tokens": 512, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}),
            ),
            ("", "[DONE]".to_string()),
        ]
    }

    #[test]
    fn an_openai_stream_gives_the_reply_of_the_non_streamed_body() {
        let non_streamed = json!({
            "id": "chatcmpl-B9xKq", "object": "chat.completion", "created": 1761000000, "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Reading both files…", "refusal": null, "annotations": [],
                "tool_calls": [
                    {"id": "call_Qx1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"calc.py\"}"}},
                    {"id": "call_Qx2", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"test_calc.py\"}"}}
                ]}, "logprobs": null, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 812, "completion_tokens": 64, "total_tokens": 876,
                "prompt_tokens_details": {"cached_tokens": 512, "audio_tokens": 0}},
            "service_tier": "default", "system_fingerprint": "fp_07871e2ad8"
        });
        let (body, shown) = assemble(OpenAiStream::default(), &openai_events());
        assert_eq!(
            openai().parse(&body.to_string()).unwrap(),
            openai().parse(&non_streamed.to_string()).unwrap()
        );
        assert_eq!(shown, ["Reading both", " files…"]);
    }

    #[test]
    fn an_ollama_stream_with_whole_tool_calls_gives_the_non_streamed_reply() {
        let head = r#""id":"chatcmpl-412","object":"chat.completion.chunk","created":1761000100,"model":"qwen3:8b","system_fingerprint":"fp_ollama""#;
        let events: Events = vec![
            (
                "",
                format!(
                    r#"{{{head},"choices":[{{"index":0,"delta":{{"role":"assistant","content":"","tool_calls":[{{"id":"call_k2v8lq3x","index":0,"type":"function","function":{{"name":"read_file","arguments":"{{\"path\":\"calc.py\"}}"}}}}]}},"finish_reason":null}}]}}"#
                ),
            ),
            (
                "",
                format!(
                    r#"{{{head},"choices":[{{"index":0,"delta":{{"role":"assistant","content":"","tool_calls":[{{"id":"call_9fj2ms0a","index":1,"type":"function","function":{{"name":"run_tests","arguments":"{{}}"}}}}]}},"finish_reason":null}}]}}"#
                ),
            ),
            (
                "",
                format!(
                    r#"{{{head},"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}},"finish_reason":"tool_calls"}}]}}"#
                ),
            ),
            (
                "",
                format!(
                    r#"{{{head},"choices":[],"usage":{{"prompt_tokens":301,"completion_tokens":38,"total_tokens":339}}}}"#
                ),
            ),
            ("", "[DONE]".to_string()),
        ];
        let non_streamed = r#"{"id":"chatcmpl-412","object":"chat.completion","created":1761000100,"model":"qwen3:8b","system_fingerprint":"fp_ollama",
            "choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[
                {"id":"call_k2v8lq3x","index":0,"type":"function","function":{"name":"read_file","arguments":"{\"path\":\"calc.py\"}"}},
                {"id":"call_9fj2ms0a","index":1,"type":"function","function":{"name":"run_tests","arguments":"{}"}}]},
              "finish_reason":"tool_calls"}],
            "usage":{"prompt_tokens":301,"completion_tokens":38,"total_tokens":339}}"#;
        let (body, shown) = assemble(OpenAiStream::default(), &events);
        assert_eq!(
            openai().parse(&body.to_string()).unwrap(),
            openai().parse(non_streamed).unwrap()
        );
        assert!(shown.is_empty());
    }

    #[test]
    fn calls_without_index_usage_on_the_last_chunk_and_no_done_are_read() {
        let piece = |call: Value| {
            (
                "",
                json!({"choices": [{"delta": {"tool_calls": [call]}, "finish_reason": null}]})
                    .to_string(),
            )
        };
        let events: Events = vec![
            piece(json!({"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":"}})),
            piece(json!({"function": {"arguments": " \"calc.py\"}"}})),
            piece(json!({"id": "call_2", "type": "function", "function": {"name": "run_tests", "arguments": ""}})),
            // Every call numbered 0, told apart by its id.
            piece(json!({"index": 0, "id": "call_3", "type": "function", "function": {"name": "run_tests", "arguments": "{}"}})),
            piece(json!({"index": 0, "id": "call_4", "type": "function", "function": {"name": "read_file", "arguments": {"path": "a.py"}}})),
            ("", json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 50, "completion_tokens": 9}}).to_string()),
        ];
        let (body, _) = assemble(OpenAiStream::default(), &events);
        let reply = openai().parse(&body.to_string()).unwrap();
        let inputs: Vec<(&str, Value)> = reply
            .content
            .iter()
            .map(|block| match block {
                ContentBlock::ToolUse { id, input, .. } => (id.as_str(), input.clone()),
                other => panic!("not a tool call: {other:?}"),
            })
            .collect();
        assert_eq!(
            inputs,
            [
                ("call_1", json!({"path": "calc.py"})),
                ("call_2", json!({})),
                ("call_3", json!({})),
                ("call_4", json!({"path": "a.py"}))
            ]
        );
        assert_eq!(reply.stop_reason, StopReason::ToolUse);
        assert_eq!(reply.usage.input_tokens, 50);
    }

    #[tokio::test]
    async fn awkward_chunk_boundaries_and_crlf_give_the_same_body() {
        let (anthropic_body, anthropic_shown) =
            assemble(AnthropicStream::default(), &anthropic_events());
        let (openai_body, openai_shown) = assemble(OpenAiStream::default(), &openai_events());
        for newline in ["\n", "\r\n"] {
            let anthropic_text = sse_text(&anthropic_events(), newline);
            let openai_text = sse_text(&openai_events(), newline);
            // Size 1 and 2 split every line ending and every multi-byte character.
            for size in [1, 2, 3, 7, 64, 100_000] {
                let (body, shown) = read(
                    AnthropicStream::default(),
                    byte_stream(&anthropic_text, size),
                )
                .await;
                assert_eq!(
                    body.unwrap(),
                    anthropic_body,
                    "anthropic, {size}-byte chunks"
                );
                assert_eq!(shown, anthropic_shown);
                let (body, shown) =
                    read(OpenAiStream::default(), byte_stream(&openai_text, size)).await;
                assert_eq!(body.unwrap(), openai_body, "openai, {size}-byte chunks");
                assert_eq!(shown, openai_shown);
            }
        }
    }

    #[tokio::test]
    async fn a_stream_cut_before_its_end_is_an_error_after_events() {
        let events = anthropic_events();
        let text = sse_text(&events, "\n");
        // Cut inside the `message_delta` event: what came before is whole, the end never came.
        let cut = &text[..text.find("event: message_delta").unwrap() + 30];
        let (result, shown) = read(AnthropicStream::default(), byte_stream(cut, 5)).await;
        let failure = result.unwrap_err();
        assert!(
            failure.events_arrived && failure.ended_early(),
            "{failure:?}"
        );
        assert_eq!(
            failure.to_string(),
            "the stream ended before the reply was complete (no message_stop arrived) (after events had arrived)"
        );
        assert_eq!(shown.len(), 2);

        let openai_text = sse_text(&openai_events()[..9].to_vec(), "\n");
        let (result, _) = read(OpenAiStream::default(), byte_stream(&openai_text, 64)).await;
        let failure = result.unwrap_err();
        assert!(failure.events_arrived && failure.ended_early());
        assert!(failure.to_string().contains("no finish_reason arrived"));
    }

    #[tokio::test]
    async fn a_broken_connection_says_whether_events_had_arrived() {
        let broken = |before: &str| {
            let reset = std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "connection reset by peer",
            );
            futures_util::stream::iter(vec![
                Ok(Bytes::copy_from_slice(before.as_bytes())),
                Err(reset),
            ])
        };
        let text = sse_text(&anthropic_events(), "\n");
        let (result, _) = read(AnthropicStream::default(), broken(&text[..700])).await;
        let failure = result.unwrap_err();
        assert!(failure.events_arrived && failure.ended_early());
        assert!(matches!(failure.error, StreamError::Broken(_)));
        assert!(failure.to_string().contains("connection reset by peer"));

        let (result, _) = read(AnthropicStream::default(), broken("event: message_st")).await;
        let failure = result.unwrap_err();
        assert!(!failure.events_arrived && failure.ended_early());
    }

    #[tokio::test]
    async fn an_error_event_mid_stream_quotes_the_server() {
        let mut events = anthropic_events()[..3].to_vec();
        events.push((
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#.into(),
        ));
        let (result, _) = read(
            AnthropicStream::default(),
            byte_stream(&sse_text(&events, "\n"), 64),
        )
        .await;
        let failure = result.unwrap_err();
        assert!(failure.events_arrived && !failure.ended_early());
        assert_eq!(
            failure.to_string(),
            "the server sent an error in the stream: overloaded_error: Overloaded (after events had arrived)"
        );
        // An error as the only event: nothing of a reply had arrived.
        let only = vec![(
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
                .to_string(),
        )];
        let (result, _) = read(
            AnthropicStream::default(),
            byte_stream(&sse_text(&only, "\n"), 64),
        )
        .await;
        assert_eq!(
            result.unwrap_err().to_string(),
            "the server sent an error in the stream: overloaded_error: Overloaded (before any event arrived)"
        );

        // vLLM and Ollama send an error object as a chunk of their own.
        let mut events = openai_events()[..3].to_vec();
        events.push(("", r#"{"error":{"object":"error","message":"The model ran out of KV cache.","type":"InternalServerError","param":null,"code":500}}"#.into()));
        let (result, _) = read(
            OpenAiStream::default(),
            byte_stream(&sse_text(&events, "\n"), 64),
        )
        .await;
        let error = result.unwrap_err().error;
        assert_eq!(
            error.to_string(),
            "the server sent an error in the stream: InternalServerError: The model ran out of KV cache."
        );
    }

    #[tokio::test]
    async fn a_body_that_is_not_an_event_stream_fails_before_any_event() {
        let json_body =
            r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#;
        let (result, shown) = read(AnthropicStream::default(), byte_stream(json_body, 16)).await;
        let failure = result.unwrap_err();
        assert!(!failure.events_arrived && failure.ended_early());
        assert!(shown.is_empty());
    }

    #[test]
    fn reading_a_reqwest_body_can_run_on_any_thread() {
        fn assert_send<T: Send>(_: &T) {}
        let bytes = futures_util::stream::empty::<Result<Bytes, reqwest::Error>>();
        let mut on_text = |_: &str| {};
        let future = read_stream(AnthropicStream::default(), bytes, &mut on_text);
        assert_send(&future);
    }
}
