//! OpenAI's Responses API against a strict fake on loopback: it refuses what the real API
//! refuses (a call sent back without the reasoning that came with it, a reasoning item
//! without its encrypted content, an output for a call that was never made, the chat path's
//! token limits) and what agent-git promises never to send (`store` other than false, a
//! cache key that changes within a run). Replies are whole bodies, or their event streams
//! when the request asks for `stream`.

use crate::common::*;
use crate::models::*;
use crate::streaming::{comparable, pieces};
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const OPENAI_KEY: &str = "sk-openai-responses-test";

/// What the fake answers next: a response object (whole or streamed, as asked), or an error.
enum Next {
    Response(Value),
    Error(ResponseTemplate),
}

#[derive(Default)]
struct Seen {
    /// Each call the fake handed out, with the encrypted content of the reasoning before it.
    reasoning_of: HashMap<String, String>,
    cache_key: Option<String>,
}

struct StrictResponses {
    next: Mutex<VecDeque<Next>>,
    seen: Mutex<Seen>,
}

fn reasoning_model(model: &str) -> bool {
    model.starts_with("gpt-5") || ["o1", "o3", "o4"].iter().any(|o| model.starts_with(o))
}

/// Why the real API (or agent-git's contract) would refuse `body`, if it would.
fn refusal(body: &Value, seen: &mut Seen) -> Option<String> {
    let model = body["model"].as_str().unwrap_or("");
    if body["store"] != json!(false) {
        return Some(format!("store must be false, not {}", body["store"]));
    }
    for old in ["max_tokens", "max_completion_tokens"] {
        if body.get(old).is_some() {
            return Some(format!(
                "Unsupported parameter: '{old}'. In the Responses API, this parameter has moved \
                 to 'max_output_tokens'."
            ));
        }
    }
    if reasoning_model(model) && body.get("temperature").is_some() {
        return Some(
            "Unsupported parameter: 'temperature' is not supported with this model.".into(),
        );
    }
    let encrypted = body["include"].as_array().into_iter().flatten();
    if !reasoning_model(model) && encrypted.count() > 0 {
        return Some("Encrypted content is not supported with this model.".into());
    }
    let key = body["prompt_cache_key"].as_str().unwrap_or("").to_string();
    match &seen.cache_key {
        None => seen.cache_key = Some(key),
        Some(first) if *first != key => {
            return Some(format!(
                "prompt_cache_key changed within a run: {first} then {key}"
            ))
        }
        Some(_) => {}
    }
    input_refusal(body["input"].as_array()?, seen, reasoning_model(model))
}

fn input_refusal(input: &[Value], seen: &Seen, reasoning: bool) -> Option<String> {
    let mut calls: Vec<&str> = Vec::new();
    let mut answered: Vec<&str> = Vec::new();
    // The reasoning sent back since the last thing the user side said.
    let mut reasoning_since: Vec<&str> = Vec::new();
    for (i, item) in input.iter().enumerate() {
        let call_id = item["call_id"].as_str().unwrap_or("");
        match item["type"].as_str() {
            Some("reasoning") => {
                let Some(secret) = item["encrypted_content"].as_str() else {
                    return Some(format!(
                        "Item with id '{}' not found. Items are not persisted when `store` is \
                         set to false. Try again with `store` set to true, or remove this item \
                         from your input.",
                        item["id"].as_str().unwrap_or("")
                    ));
                };
                // What a reasoning item led to comes next: a call, a message, more reasoning.
                let next = input.get(i + 1);
                let followed = next.is_some_and(|n| {
                    matches!(n["type"].as_str(), Some("function_call" | "reasoning"))
                        || (n["type"] == "message" && n["role"] == "assistant")
                });
                if !followed {
                    return Some(
                        "Item of type 'reasoning' was provided without its required following item."
                            .into(),
                    );
                }
                reasoning_since.push(secret);
            }
            Some("function_call") => {
                let wanted = seen.reasoning_of.get(call_id);
                if let Some(secret) = wanted.filter(|_| reasoning) {
                    if !reasoning_since.contains(&secret.as_str()) {
                        return Some(format!(
                            "Item '{call_id}' of type 'function_call' was provided without its \
                             required 'reasoning' item."
                        ));
                    }
                }
                calls.push(call_id);
            }
            Some("function_call_output") => {
                if !calls.contains(&call_id) {
                    return Some(format!(
                        "No tool call found for function call output with call_id {call_id}."
                    ));
                }
                answered.push(call_id);
                reasoning_since.clear();
            }
            _ if item["role"] == "user" => reasoning_since.clear(),
            _ => {}
        }
    }
    let unanswered = calls.iter().find(|c| !answered.contains(c))?;
    Some(format!(
        "No tool output found for function call {unanswered}."
    ))
}

impl Respond for StrictResponses {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let mut seen = self.seen.lock().unwrap();
        if let Some(why) = refusal(&body, &mut seen) {
            return ResponseTemplate::new(400).set_body_json(json!({"error": {
                "message": why, "type": "invalid_request_error", "param": null, "code": null
            }}));
        }
        let next = self.next.lock().unwrap().pop_front();
        let response = match next {
            Some(Next::Response(response)) => response,
            Some(Next::Error(template)) => return template,
            None => return ResponseTemplate::new(500),
        };
        let mut secret = None;
        for item in response["output"].as_array().into_iter().flatten() {
            match item["type"].as_str() {
                Some("reasoning") => secret = item["encrypted_content"].as_str(),
                Some("function_call") => {
                    if let Some(secret) = secret {
                        let id = item["call_id"].as_str().unwrap_or("").to_string();
                        seen.reasoning_of.insert(id, secret.to_string());
                    }
                }
                _ => {}
            }
        }
        if body["stream"] == true {
            ResponseTemplate::new(200).set_body_raw(events_of(&response), "text/event-stream")
        } else {
            ok(response)
        }
    }
}

async fn strict_responses(next: Vec<Next>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(StrictResponses {
            next: Mutex::new(next.into()),
            seen: Mutex::new(Seen::default()),
        })
        .mount(&server)
        .await;
    server
}

/// The event stream OpenAI sends for `response`: each item added empty and built from its
/// deltas, done whole (unless it was cut off), then the response that ends the stream.
fn events_of(response: &Value) -> String {
    let mut events: Vec<(String, Value)> = Vec::new();
    let mut head = response.clone();
    head["status"] = json!("in_progress");
    head["output"] = json!([]);
    head["usage"] = Value::Null;
    events.push(("response.created".into(), json!({"response": head})));
    for (index, item) in response["output"].as_array().unwrap().iter().enumerate() {
        let mut empty = item.clone();
        empty["status"] = json!("in_progress");
        let at = json!({"output_index": index, "item_id": item["id"]});
        let with = |mut v: Value, extra: Value| {
            for (k, x) in extra.as_object().unwrap() {
                v[k] = x.clone();
            }
            v
        };
        let mut deltas = Vec::new();
        match item["type"].as_str() {
            Some("message") => {
                empty["content"] = json!([]);
                for (part, content) in item["content"].as_array().unwrap().iter().enumerate() {
                    let at = with(at.clone(), json!({"content_index": part}));
                    deltas.push((
                        "response.content_part.added",
                        with(
                            at.clone(),
                            json!({"part": {"type": "output_text", "annotations": [], "text": ""}}),
                        ),
                    ));
                    for piece in pieces(content["text"].as_str().unwrap()) {
                        deltas.push((
                            "response.output_text.delta",
                            with(at.clone(), json!({"delta": piece})),
                        ));
                    }
                }
            }
            Some("function_call") => {
                empty["arguments"] = json!("");
                for piece in pieces(item["arguments"].as_str().unwrap()) {
                    deltas.push((
                        "response.function_call_arguments.delta",
                        with(at.clone(), json!({"delta": piece})),
                    ));
                }
            }
            _ => {}
        }
        events.push((
            "response.output_item.added".into(),
            json!({"output_index": index, "item": empty}),
        ));
        events.extend(deltas.into_iter().map(|(n, v)| (n.to_string(), v)));
        if item["status"] != "incomplete" {
            events.push((
                "response.output_item.done".into(),
                json!({"output_index": index, "item": item}),
            ));
        }
    }
    let end = match response["status"].as_str() {
        Some("incomplete") => "response.incomplete",
        _ => "response.completed",
    };
    events.push((end.into(), json!({"response": response})));
    events
        .into_iter()
        .enumerate()
        .map(|(n, (name, mut data))| {
            data["type"] = json!(name);
            data["sequence_number"] = json!(n);
            format!("event: {name}\ndata: {data}\n\n")
        })
        .collect()
}

fn reasoning(n: u32) -> Value {
    json!({"id": format!("rs_{n}"), "type": "reasoning", "summary": [],
           "encrypted_content": format!("gAAAAB-secret-{n}")})
}

fn said(n: u32, text: &str) -> Value {
    json!({"id": format!("msg_{n}"), "type": "message", "status": "completed", "role": "assistant",
           "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": text}]})
}

fn call(call_id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": format!("fc_{call_id}"), "type": "function_call", "status": "completed",
           "arguments": arguments.to_string(), "call_id": call_id, "name": name})
}

fn response(output: Vec<Value>, input: u64, cached: u64, output_tokens: u64) -> Value {
    json!({"id": "resp_1", "object": "response", "created_at": 1761000000, "status": "completed",
           "error": null, "incomplete_details": null, "model": "gpt-5-2025-08-07", "output": output,
           "usage": {"input_tokens": input, "input_tokens_details": {"cached_tokens": cached},
                     "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": output_tokens / 2},
                     "total_tokens": input + output_tokens}})
}

fn fix_arguments() -> Value {
    json!({"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"})
}

/// Read the file, edit it, end the turn: each reply reasons first.
fn fix_replies() -> Vec<Next> {
    vec![
        Next::Response(response(
            vec![
                reasoning(1),
                call("call_read", "read_file", json!({"path": "calc.py"})),
            ],
            900,
            0,
            80,
        )),
        Next::Response(response(
            vec![
                reasoning(2),
                said(2, "add() subtracts; make it add."),
                call("call_edit", "edit_file", fix_arguments()),
            ],
            1100,
            800,
            120,
        )),
        Next::Response(response(
            vec![reasoning(3), said(3, "Fixed add().")],
            1300,
            1000,
            40,
        )),
    ]
}

fn responses_fix(
    env: &TestEnv,
    repo: &std::path::Path,
    server: &MockServer,
    args: &[&str],
) -> std::process::Command {
    let mut all = vec![
        "--model",
        "openai-responses:gpt-5",
        "--context-window",
        "400000",
    ];
    all.extend_from_slice(args);
    let mut cmd = local_fix(env, repo, &server.uri(), &all);
    cmd.env("OPENAI_API_KEY", OPENAI_KEY);
    cmd
}

async fn bodies(server: &MockServer) -> Vec<Value> {
    let requests = server.received_requests().await.unwrap();
    requests
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

fn rate_limited() -> Next {
    Next::Error(
        ResponseTemplate::new(429)
            .insert_header("retry-after-ms", "20")
            .set_body_json(
                json!({"error": {"message": "Rate limit reached for gpt-5 on tokens per min (TPM).",
                "type": "tokens", "param": null, "code": "rate_limit_exceeded"}}),
            ),
    )
}

/// A whole run: a 429 retried, each request stateless with the reasoning sent back before
/// the calls it led to, one cache key, the report naming the API; recorded, it replays; and
/// the same replies streamed end with the same branch and report.
#[tokio::test(flavor = "multi_thread")]
async fn a_fix_run_on_the_responses_api_sends_reasoning_back_streamed_or_whole() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let mut replies = vec![rate_limited()];
    replies.extend(fix_replies());
    let server = strict_responses(replies).await;
    let recording = env.path().join("responses.jsonl");
    let args = [
        "--branch",
        "agent/whole",
        "--no-stream",
        "--record",
        recording.to_str().unwrap(),
        "--json",
    ];
    let out = run(responses_fix(&env, &repo, &server, &args)).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "call 1 to openai-responses failed with HTTP 429: tokens: Rate limit reached"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.show(&repo, "agent/whole:calc.py"), CALC_FIXED);
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["model"], "openai-responses:gpt-5");
    assert_eq!(json["outcome"], "passed");
    assert_eq!(
        env.trailer(&repo, "agent/whole", "Agent-Model"),
        "openai-responses:gpt-5"
    );
    assert_eq!(
        env.trailer(&repo, "agent/whole", "Agent-Tokens"),
        "1500 in, 240 out, 0 cache write, 1800 cache read"
    );

    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 4, "one retry, then three replies");
    for r in &requests {
        let bearer = format!("Bearer {OPENAI_KEY}");
        assert_eq!(r.headers.get("authorization").unwrap(), bearer.as_str());
    }
    let sent = bodies(&server).await;
    for body in &sent {
        assert_eq!(body["reasoning"], json!({"effort": "medium"}));
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(body["max_output_tokens"], 8192);
        assert!(body["prompt_cache_key"]
            .as_str()
            .unwrap()
            .starts_with("agent-git-"));
        assert_eq!(
            body["tools"], sent[0]["tools"],
            "tools are the same every turn"
        );
        assert!(body.get("stream").is_none());
    }
    assert_eq!(
        sent[1]["tools"][0]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["description", "name", "parameters", "strict", "type"]
    );
    let last = sent[3]["input"].as_array().unwrap();
    let kinds: Vec<&str> = last.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "message",
            "reasoning",
            "function_call",
            "function_call_output",
            "reasoning",
            "message",
            "function_call",
            "function_call_output"
        ]
    );
    assert_eq!(
        last[4],
        json!({"type": "reasoning", "summary": [], "encrypted_content": "gAAAAB-secret-2"}),
        "sent back whole, without the id the server did not keep"
    );
    assert_eq!(
        last[5],
        json!({"type": "message", "role": "assistant",
               "content": [{"type": "output_text", "text": "add() subtracts; make it add."}]})
    );
    assert_eq!(last[6]["call_id"], "call_edit");
    assert!(last[7]["output"].as_str().unwrap().ends_with("; committed"));

    // The recording answers a replay, request for request.
    drop(server);
    let replay = format!("replay:{}", recording.display());
    let out = env.agent(
        &repo,
        &[
            "fix",
            "Fix the adder",
            "--model",
            &replay,
            "--branch",
            "agent/replayed",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(env.show(&repo, "agent/replayed:calc.py"), CALC_FIXED);
    // Only the first message may differ: it quotes pytest's timing of the first test run.
    let report = env.message(&repo, "agent/replayed");
    let notes: Vec<&str> = report.lines().filter(|l| l.contains("replay: ")).collect();
    let timing_only = notes
        .iter()
        .all(|n| n.ends_with("differs from the recording at input[0].content[0].text"));
    assert!(
        notes == ["  replay: all 3 requests matched the recording"]
            || (notes.len() == 3 && timing_only),
        "{report}"
    );

    // Streamed: the text shows as it arrives, and the run ends as the whole one did.
    let server = strict_responses(fix_replies()).await;
    let out = run(responses_fix(
        &env,
        &repo,
        &server,
        &["--branch", "agent/streamed"],
    ))
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("\n    add() subtracts; make it add.\nagent-git: turn 2: edit"),
        "{}",
        stderr(&out)
    );
    for body in bodies(&server).await {
        assert_eq!(body["stream"], true);
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
}

/// A prompt too long for the window shrinks the conversation and the run goes on, as on the
/// chat path; a reply cut off at `max_output_tokens` runs none of its calls, which are
/// answered so, with the reasoning before them still sent back.
#[tokio::test(flavor = "multi_thread")]
async fn an_overflow_and_a_cut_off_reply_are_handled_as_on_the_chat_path() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", TEST_CALC),
            ("data.txt", &"0123456789abcdef\n".repeat(1000)),
        ],
    );
    let too_long = Next::Error(ResponseTemplate::new(400).set_body_json(json!({"error": {
        "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
        "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}})));
    let mut cut = response(
        vec![
            reasoning(9),
            json!({"id": "fc_cut", "type": "function_call", "status": "incomplete", "call_id": "call_cut",
                   "name": "write_file", "arguments": "{\"path\": \"calc.py\", \"content\": \"def add(a, b):\\n    return a"}),
        ],
        1000,
        0,
        8192,
    );
    cut["status"] = json!("incomplete");
    cut["incomplete_details"] = json!({"reason": "max_output_tokens"});
    let mut replies = vec![
        Next::Response(response(
            vec![
                reasoning(1),
                call("call_read", "read_file", json!({"path": "data.txt"})),
            ],
            900,
            0,
            80,
        )),
        too_long,
        Next::Response(cut),
    ];
    replies.extend(fix_replies().into_iter().skip(1));
    let server = strict_responses(replies).await;
    let out = run(responses_fix(
        &env,
        &repo,
        &server,
        &["--branch", "agent/cut"],
    ))
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(env.show(&repo, "agent/cut:calc.py"), CALC_FIXED);
    let report = env.message(&repo, "agent/cut");
    for line in [
        "prompt too long -> Your input exceeds the context window of this model.",
        "context nearly full -> 1 long tool results cut",
        "reply cut off (max_tokens) -> its tool calls did not run",
    ] {
        assert!(report.contains(line), "{line}\n{report}");
    }

    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 5, "the refused request is sent again, shrunk");
    let after_cut = sent[3]["input"].as_array().unwrap();
    let n = after_cut.len();
    assert_eq!(
        after_cut[n - 3..],
        [
            json!({"type": "reasoning", "summary": [], "encrypted_content": "gAAAAB-secret-9"}),
            json!({"type": "function_call", "call_id": "call_cut", "name": "write_file", "arguments": "{}"}),
            after_cut[n - 1].clone(),
        ]
    );
    let answer = after_cut[n - 1]["output"].as_str().unwrap();
    assert!(
        answer.starts_with("ERROR: not run: your reply was cut off at the token limit"),
        "{answer}"
    );
}

/// The fake is only worth its passes if it refuses: each refusal it makes, on a body that
/// differs from a good one in that one way.
#[test]
fn the_fake_refuses_what_the_real_api_refuses() {
    let mut seen = Seen::default();
    seen.reasoning_of
        .insert("call_1".into(), "gAAAAB-secret-1".into());
    let user = json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix"}]});
    let thought =
        json!({"type": "reasoning", "summary": [], "encrypted_content": "gAAAAB-secret-1"});
    let called = json!({"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": "{}"});
    let answered = json!({"type": "function_call_output", "call_id": "call_1", "output": "x"});
    let good = json!({"model": "gpt-5", "store": false, "prompt_cache_key": "k",
        "include": ["reasoning.encrypted_content"],
        "input": [user, thought, called, answered]});
    assert_eq!(refusal(&good, &mut seen), None);
    let refused = |change: &dyn Fn(&mut Value), says: &str| {
        let mut body = good.clone();
        change(&mut body);
        let mut seen = Seen {
            reasoning_of: seen.reasoning_of.clone(),
            cache_key: Some("k".into()),
        };
        let why = refusal(&body, &mut seen).unwrap_or_default();
        assert!(why.contains(says), "{says}: {why}");
    };
    refused(&|b| b["store"] = json!(true), "store must be false");
    refused(&|b| b["max_tokens"] = json!(10), "'max_tokens'");
    refused(
        &|b| b["max_completion_tokens"] = json!(10),
        "'max_completion_tokens'",
    );
    refused(&|b| b["temperature"] = json!(0.2), "'temperature'");
    refused(
        &|b| b["model"] = json!("gpt-4.1"),
        "Encrypted content is not supported",
    );
    refused(
        &|b| b["prompt_cache_key"] = json!("k2"),
        "prompt_cache_key changed",
    );
    let input = |b: &mut Value| b["input"].as_array_mut().unwrap().clone();
    refused(
        &|b| {
            let mut items = input(b);
            items.remove(1);
            b["input"] = json!(items);
        },
        "without its required 'reasoning' item",
    );
    refused(
        &|b| b["input"][1] = json!({"type": "reasoning", "id": "rs_1", "summary": []}),
        "Items are not persisted when `store` is set to false",
    );
    refused(
        &|b| {
            let mut items = input(b);
            items.remove(2);
            b["input"] = json!(items);
        },
        "without its required following item",
    );
    refused(
        &|b| b["input"][3]["call_id"] = json!("call_9"),
        "No tool call found for function call output with call_id call_9",
    );
    refused(
        &|b| {
            let mut items = input(b);
            items.pop();
            b["input"] = json!(items);
        },
        "No tool output found for function call call_1",
    );
}
