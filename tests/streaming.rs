//! Streamed replies: the text shows as it arrives, and the run is the same as without
//! streaming. The fake server sends the providers' event streams, built from the same reply
//! bodies the whole-reply tests use.

use crate::common::*;
use crate::models::*;
use serde_json::{json, Value};
use wiremock::ResponseTemplate;

fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// Splits a text in three pieces, as a stream cuts it anywhere.
pub fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let third = chars.len() / 3;
    [
        &chars[..third],
        &chars[third..2 * third],
        &chars[2 * third..],
    ]
    .iter()
    .map(|part| part.iter().collect())
    .collect()
}

/// The Anthropic event stream of a whole message: each block started, sent in pieces
/// (`text_delta`, `input_json_delta`), stopped; then `message_delta` and `message_stop`.
fn anthropic_events(message: &Value) -> String {
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
    let mut out = event(
        "message_start",
        json!({"type": "message_start", "message": start}),
    );
    out.push_str(&event("ping", json!({"type": "ping"})));
    for (index, block) in message["content"].as_array().unwrap().iter().enumerate() {
        let (empty, deltas) = match block["type"].as_str().unwrap() {
            "text" => {
                let deltas: Vec<Value> = pieces(block["text"].as_str().unwrap())
                    .into_iter()
                    .map(|text| json!({"type": "text_delta", "text": text}))
                    .collect();
                (json!({"type": "text", "text": ""}), deltas)
            }
            _ => {
                let mut empty = block.clone();
                empty["input"] = json!({});
                let deltas = pieces(&block["input"].to_string())
                    .into_iter()
                    .map(|partial| json!({"type": "input_json_delta", "partial_json": partial}))
                    .collect();
                (empty, deltas)
            }
        };
        out.push_str(&event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": empty}),
        ));
        for delta in deltas {
            out.push_str(&event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        out.push_str(&event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    out.push_str(&event(
        "message_delta",
        json!({"type": "message_delta",
               "delta": {"stop_reason": message["stop_reason"], "stop_sequence": null},
               "usage": {"output_tokens": message["usage"]["output_tokens"]}}),
    ));
    out.push_str(&event("message_stop", json!({"type": "message_stop"})));
    out
}

pub fn sse(text: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(text, "text/event-stream")
}

fn anthropic_replies() -> Vec<Value> {
    vec![
        anthropic_message(
            "tool_use",
            json!([
                {"type": "text", "text": "add() subtracts; make it add."},
                {"type": "tool_use", "id": "toolu_01", "name": "edit_file",
                 "input": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}
            ]),
            anthropic_usage(20, 1500, 0, 60),
        ),
        anthropic_message(
            "end_turn",
            json!([{"type": "text", "text": "Fixed add().\nIt adds now."}]),
            anthropic_usage(30, 80, 1500, 10),
        ),
    ]
}

/// The report with what differs between two runs of the same replies taken out: the run id,
/// the branch, and the ids of commits that carry the run id.
pub fn comparable(report: &str, branch: &str) -> String {
    report
        .lines()
        .filter(|line| !line.starts_with("Agent-Run:"))
        .map(|line| match line.split_once("-> commit ") {
            Some((before, _)) => format!("{before}-> commit ID"),
            None => line.replace(branch, "BRANCH"),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streamed_run_shows_its_text_and_ends_as_the_same_run_without_streaming() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let streamed = fake_api(
        "/v1/messages",
        anthropic_replies()
            .iter()
            .map(|m| sse(anthropic_events(m)))
            .collect(),
    )
    .await;
    let cmd = claude_fix(
        &env,
        &repo,
        &streamed,
        "anthropic:claude-sonnet-4-5",
        "agent/streamed",
        &[],
    );
    let out = run(cmd).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("\n    add() subtracts; make it add.\nagent-git: turn 1: edit"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("\n    Fixed add().\n    It adds now.\n"),
        "{}",
        stderr(&out)
    );
    for request in streamed.received_requests().await.unwrap() {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body["stream"], true);
    }

    let whole = fake_api(
        "/v1/messages",
        anthropic_replies().into_iter().map(ok).collect(),
    )
    .await;
    let cmd = claude_fix(
        &env,
        &repo,
        &whole,
        "anthropic:claude-sonnet-4-5",
        "agent/whole",
        &["--no-stream"],
    );
    let out = run(cmd).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!stderr(&out).contains("    add() subtracts"));
    for request in whole.received_requests().await.unwrap() {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert!(body.get("stream").is_none(), "{body}");
    }

    let tree = |branch: &str| env.git(&repo, &["rev-parse", &format!("{branch}^{{tree}}")]);
    assert_eq!(tree("agent/streamed"), tree("agent/whole"));
    assert_eq!(
        env.subjects(&repo, "agent/streamed"),
        env.subjects(&repo, "agent/whole")
    );
    assert_eq!(
        comparable(&env.message(&repo, "agent/streamed"), "agent/streamed"),
        comparable(&env.message(&repo, "agent/whole"), "agent/whole")
    );
    assert_eq!(
        env.trailer(&repo, "agent/streamed", "Agent-Tokens"),
        "50 in, 70 out, 1580 cache write, 1500 cache read"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_cut_after_it_began_is_asked_again_whole_and_reported() {
    let replies = anthropic_replies();
    let full = anthropic_events(&replies[0]);
    // Cut inside the tool call's input: what arrived is not a reply.
    let cut = full[..full.find("input_json_delta").unwrap() + 40].to_string();
    let server = fake_api(
        "/v1/messages",
        vec![
            // Nothing at all before the end: a failed request, retried without a word.
            sse(String::new()),
            sse(cut),
            sse(full),
            sse(anthropic_events(&replies[1])),
        ],
    )
    .await;
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let cmd = claude_fix(
        &env,
        &repo,
        &server,
        "anthropic:claude-sonnet-4-5",
        "agent/cut",
        &[],
    );
    let out = run(cmd).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(server.received_requests().await.unwrap().len(), 4);
    assert_eq!(env.show(&repo, "agent/cut:calc.py"), CALC_FIXED);
    let report = env.message(&repo, "agent/cut");
    assert!(
        report.contains(
            "call 1: the reply stream failed after it began (the stream ended before the reply \
             was complete (no message_stop arrived)); the whole request was sent again"
        ),
        "{report}"
    );
    assert_eq!(
        report.matches("the reply stream failed").count(),
        1,
        "{report}"
    );
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let chunk = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "gpt-4o-mini", "choices": [{"index": 0, "delta": delta, "logprobs": null,
        "finish_reason": finish}]});
    format!("data: {chunk}\n\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_openai_stream_assembles_tool_calls_and_usage() {
    let arguments =
        json!({"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"})
            .to_string();
    let mut first = chunk(json!({"role": "assistant", "content": ""}), None);
    first.push_str(&chunk(json!({"content": "Fixing add()."}), None));
    first.push_str(&chunk(
        json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                "function": {"name": "edit_file", "arguments": ""}}]}),
        None,
    ));
    for piece in pieces(&arguments) {
        first.push_str(&chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
            None,
        ));
    }
    first.push_str(&chunk(json!({}), Some("tool_calls")));
    let usage = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "gpt-4o-mini", "choices": [],
        "usage": {"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940,
                  "prompt_tokens_details": {"cached_tokens": 100}}});
    first.push_str(&format!("data: {usage}\n\ndata: [DONE]\n\n"));
    let mut second = chunk(json!({"role": "assistant", "content": "Done."}), None);
    second.push_str(&chunk(json!({}), Some("stop")));
    second.push_str(&format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"id": "c", "object": "chat.completion.chunk", "choices": [],
               "usage": {"prompt_tokens": 1000, "completion_tokens": 5, "total_tokens": 1005}})
    ));
    let server = fake_api("/v1/chat/completions", vec![sse(first), sse(second)]).await;
    let env = TestEnv::new();
    let repo = env.calc_repo();
    // A local URL needs a window; this one is OpenAI's model on a stand-in server.
    let mut cmd = local_fix(
        &env,
        &repo,
        &server.uri(),
        &[
            "--model",
            "openai:gpt-4o-mini",
            "--context-window",
            "128000",
            "--branch",
            "agent/openai-stream",
        ],
    );
    cmd.env("OPENAI_API_KEY", "sk-openai-test");
    let out = run(cmd).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("    Fixing add().\n"),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.show(&repo, "agent/openai-stream:calc.py"), CALC_FIXED);
    let sent: Value =
        serde_json::from_slice(&server.received_requests().await.unwrap()[0].body).unwrap();
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        env.trailer(&repo, "agent/openai-stream", "Agent-Tokens"),
        "1800 in, 45 out, 0 cache write, 100 cache read"
    );
}

#[test]
fn without_streaming_anthropic_replies_are_limited_in_length() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let out = env
        .agent_cmd(
            &repo,
            &[
                "fix",
                "--model",
                "anthropic:claude-sonnet-4-5",
                "--no-stream",
                "--max-tokens",
                "32000",
            ],
        )
        .env("ANTHROPIC_API_KEY", KEY)
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "--max-tokens 32000 (with room for thinking, 40192) needs a streamed reply: \
             without streaming, Anthropic allows at most 21333"
        ),
        "{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streamed_tool_call_cut_at_max_tokens_does_not_run_and_the_run_goes_on() {
    let partial = "{\"path\": \"calc.py\", \"content\": \"def add(a, b):\\n    return a";
    let mut cut = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_cut", "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 20, "output_tokens": 1}}}),
    );
    cut.push_str(&event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block":
            {"type": "tool_use", "id": "toolu_cut", "name": "write_file", "input": {}}}),
    ));
    cut.push_str(&event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "input_json_delta", "partial_json": partial}}),
    ));
    cut.push_str(&event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    cut.push_str(&event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": null},
               "usage": {"output_tokens": 8192}}),
    ));
    cut.push_str(&event("message_stop", json!({"type": "message_stop"})));
    let mut replies = vec![sse(cut)];
    replies.extend(anthropic_replies().iter().map(|m| sse(anthropic_events(m))));
    let server = fake_api("/v1/messages", replies).await;
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let cmd = claude_fix(
        &env,
        &repo,
        &server,
        "anthropic:claude-sonnet-4-5",
        "agent/cut-call",
        &[],
    );
    let out = run(cmd).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(env.show(&repo, "agent/cut-call:calc.py"), CALC_FIXED);

    let second: Value =
        serde_json::from_slice(&server.received_requests().await.unwrap()[1].body).unwrap();
    // The API refuses a tool call whose input is not an object: the cut one goes back as {}.
    assert_eq!(
        second["messages"][1]["content"][0],
        json!({"type": "tool_use", "id": "toolu_cut", "name": "write_file", "input": {}})
    );
    let result = &second["messages"][2]["content"][0];
    assert_eq!(result["is_error"], true);
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .starts_with("not run: your reply was cut off at the token limit"),
        "{result}"
    );
    assert!(env
        .message(&repo, "agent/cut-call")
        .contains("reply cut off (max_tokens) -> its tool calls did not run"));
}
