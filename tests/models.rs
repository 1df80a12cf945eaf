//! Real model adapters against a fake API on loopback, with response bodies shaped like the
//! providers' own. The whole `agent-git fix` runs as a process; the server records requests.

use crate::common::*;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::process::{Command, Output};
use std::sync::Mutex;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

pub const KEY: &str = "sk-ant-test-0123456789-secret";

/// Answers each request with the next response of a list, then with 500s.
pub struct Replies(pub Mutex<VecDeque<ResponseTemplate>>);

impl Respond for Replies {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        self.0
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| ResponseTemplate::new(500))
    }
}

pub async fn fake_api(route: &str, replies: Vec<ResponseTemplate>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(route))
        .respond_with(Replies(Mutex::new(replies.into())))
        .mount(&server)
        .await;
    server
}

pub async fn run(cmd: Command) -> Output {
    let mut cmd = cmd;
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

pub fn ok(body: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(body)
}

pub fn anthropic_message(stop_reason: &str, content: Value, usage: Value) -> Value {
    json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
        "content": content, "stop_reason": stop_reason, "stop_sequence": null,
        "usage": usage
    })
}

pub fn anthropic_usage(input: u64, write: u64, read: u64, output: u64) -> Value {
    json!({
        "input_tokens": input, "cache_creation_input_tokens": write, "cache_read_input_tokens": read,
        "cache_creation": {"ephemeral_5m_input_tokens": write, "ephemeral_1h_input_tokens": 0},
        "output_tokens": output, "service_tier": "standard"
    })
}

pub fn anthropic_fix_replies() -> Vec<ResponseTemplate> {
    vec![
        ok(anthropic_message(
            "tool_use",
            json!([
                {"type": "text", "text": "add() subtracts; make it add."},
                {"type": "tool_use", "id": "toolu_01", "name": "edit_file",
                 "input": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"},
                 "caller": {"type": "direct"}}
            ]),
            anthropic_usage(20, 1500, 0, 60),
        )),
        ok(anthropic_message(
            "end_turn",
            json!([{"type": "text", "text": "Fixed add()."}]),
            anthropic_usage(30, 80, 1500, 10),
        )),
    ]
}

/// `agent-git fix "Fix the adder" --model MODEL --branch BRANCH [extra]` with a key, against
/// the fake Anthropic API.
pub fn claude_fix(
    env: &TestEnv,
    repo: &std::path::Path,
    server: &MockServer,
    model: &str,
    branch: &str,
    extra: &[&str],
) -> Command {
    let mut args = vec!["fix", "Fix the adder", "--model", model, "--branch", branch];
    args.extend_from_slice(extra);
    let mut cmd = env.agent_cmd(repo, &args);
    cmd.env("ANTHROPIC_API_KEY", KEY)
        .env("ANTHROPIC_BASE_URL", server.uri());
    cmd
}

/// `agent-git fix "Fix the adder" [args]` against the fake server as an OpenAI-compatible one.
pub fn local_fix(env: &TestEnv, repo: &std::path::Path, server: &str, args: &[&str]) -> Command {
    let mut all = vec!["fix", "Fix the adder"];
    all.extend_from_slice(args);
    let mut cmd = env.agent_cmd(repo, &all);
    cmd.env("OPENAI_BASE_URL", format!("{server}/v1"));
    cmd
}

fn strip_cache_control(mut value: Value) -> Value {
    match &mut value {
        Value::Object(map) => {
            map.remove("cache_control");
            for v in map.values_mut() {
                *v = strip_cache_control(v.take());
            }
        }
        Value::Array(items) => {
            for v in items.iter_mut() {
                *v = strip_cache_control(v.take());
            }
        }
        _ => {}
    }
    value
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fix_run_against_the_anthropic_api_retries_caches_and_keeps_the_key_secret() {
    let overloaded = ResponseTemplate::new(529).set_body_json(
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    );
    let mut replies = vec![overloaded];
    replies.extend(anthropic_fix_replies());
    let server = fake_api("/v1/messages", replies).await;
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let transcript = env.path().join("t.json");
    let recording = env.path().join("rec.jsonl");
    let cmd = claude_fix(
        &env,
        &repo,
        &server,
        "anthropic:claude-sonnet-4-5",
        "agent/claude",
        &[
            "--max-tokens",
            "2048",
            "--transcript",
            transcript.to_str().unwrap(),
            "--record",
            recording.to_str().unwrap(),
        ],
    );
    let out = run(cmd).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("failed with HTTP 529: overloaded_error: Overloaded; retrying in"),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.show(&repo, "agent/claude:calc.py"), CALC_FIXED);

    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 3, "one retry, then two replies");
    for r in &requests {
        assert_eq!(r.headers.get("x-api-key").unwrap(), KEY);
        assert_eq!(r.headers.get("anthropic-version").unwrap(), "2023-06-01");
        assert!(
            !String::from_utf8_lossy(&r.body).contains(KEY),
            "the key is a header, never in a body"
        );
    }
    let first: Value = serde_json::from_slice(&requests[1].body).unwrap();
    let second: Value = serde_json::from_slice(&requests[2].body).unwrap();
    assert_eq!(first["model"], "claude-sonnet-4-5");
    // Thinking by default, with the reply's limit raised to hold its budget.
    assert_eq!(
        first["thinking"],
        json!({"type": "enabled", "budget_tokens": 8192})
    );
    assert_eq!(first["max_tokens"], 2048 + 8192);
    assert_eq!(
        first["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(
        first["tools"], second["tools"],
        "tools are byte-identical between turns"
    );
    assert_eq!(first["system"], second["system"]);
    // The newest message carries the breakpoint; the earlier ones are sent as before.
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(
        strip_cache_control(first["messages"].clone()),
        json!(messages[..1])
    );
    assert!(messages[0]["content"][0].get("cache_control").is_none());
    assert_eq!(
        messages[1]["content"][1]["caller"],
        Value::Null,
        "fields we do not model are not invented"
    );
    let results = messages[2]["content"].as_array().unwrap();
    assert_eq!(results[0]["type"], "tool_result", "tool results come first");
    assert_eq!(results[0]["tool_use_id"], "toolu_01");
    assert_eq!(
        results.last().unwrap()["cache_control"],
        json!({"type": "ephemeral"})
    );

    let report = env.message(&repo, "agent/claude");
    assert_eq!(
        env.trailer(&repo, "agent/claude", "Agent-Model"),
        "anthropic:claude-sonnet-4-5"
    );
    assert_eq!(
        env.trailer(&repo, "agent/claude", "Agent-Tokens"),
        "50 in, 70 out, 1580 cache write, 1500 cache read"
    );
    // (50*3 + 70*15 + 1580*3.75 + 1500*0.3) dollars per million tokens.
    assert_eq!(
        env.trailer(&repo, "agent/claude", "Agent-Cost"),
        "0.0076 USD"
    );
    assert!(
        report.contains("(47% of input read from the cache)"),
        "{report}"
    );

    for (what, text) in [
        ("report", report),
        ("stdout", stdout(&out)),
        ("stderr", stderr(&out)),
        ("transcript", std::fs::read_to_string(&transcript).unwrap()),
        ("recording", std::fs::read_to_string(&recording).unwrap()),
    ] {
        assert!(!text.contains(KEY), "the key leaked into the {what}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fix_run_against_an_openai_compatible_server() {
    let tool_calls = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "refusal": null,
            "tool_calls": [
                {"id": "call_bad", "type": "function", "function": {"name": "edit_file", "arguments": "{\"path\": \"calc.py\", "}},
                {"id": "call_fix", "type": "function", "function": {"name": "edit_file",
                    "arguments": "{\"path\":\"calc.py\",\"old_text\":\"return a - b\",\"new_text\":\"return a + b\"}"}}
            ]}, "logprobs": null, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940,
                  "prompt_tokens_details": {"cached_tokens": 0}}
    });
    // Ollama's shape: no refusal field, a fingerprint, tool-call-free final answer.
    let done = json!({
        "id": "chatcmpl-2", "object": "chat.completion", "created": 2, "model": "gpt-4o-mini",
        "system_fingerprint": "fp_ollama",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Fixed add()."}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 5, "total_tokens": 1005}
    });
    let server = fake_api("/v1/chat/completions", vec![ok(tool_calls), ok(done)]).await;
    // vLLM's model list names the window the server runs the model with.
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ok(json!({"object": "list", "data": [
            {"id": "gpt-4o-mini", "object": "model", "owned_by": "vllm", "max_model_len": 32768}
        ]})))
        .mount(&server)
        .await;
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let mut cmd = local_fix(
        &env,
        &repo,
        &server.uri(),
        &["--model", "openai:gpt-4o-mini", "--branch", "agent/gpt"],
    );
    cmd.env("OPENAI_API_KEY", "sk-openai-test");
    let out = run(cmd).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(env.show(&repo, "agent/gpt:calc.py"), CALC_FIXED);

    let requests: Vec<_> = server
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.url.path() == "/v1/chat/completions")
        .collect();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].headers.get("authorization").unwrap(),
        "Bearer sk-openai-test"
    );
    let second: Value = serde_json::from_slice(&requests[1].body).unwrap();
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[2]["role"], "assistant");
    assert_eq!(messages[2]["content"], Value::Null);
    // Arguments that were not JSON go back as valid JSON: servers refuse them otherwise.
    assert_eq!(messages[2]["tool_calls"][0]["function"]["arguments"], "{}");
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[3]["tool_call_id"], "call_bad");
    assert!(
        messages[3]["content"].as_str().unwrap().starts_with(
            "ERROR: invalid input for edit_file: the arguments are not valid JSON (EOF while \
             parsing a value at line 1 column 20); send the call again with one JSON object. \
             They began: {\"path\": \"calc.py\", "
        ),
        "{}",
        messages[3]
    );
    assert_eq!(messages[4]["tool_call_id"], "call_fix");
    assert!(messages[4]["content"]
        .as_str()
        .unwrap()
        .ends_with("; committed"));
    let report = env.message(&repo, "agent/gpt");
    assert!(
        report.contains("[1] edit -> refused: invalid input"),
        "{report}"
    );
    assert!(
        report
            .contains("context window: 32768 tokens, from the server's /v1/models (max_model_len)"),
        "{report}"
    );
    assert_eq!(
        env.trailer(&repo, "agent/gpt", "Agent-Tokens"),
        "1900 in, 45 out, 0 cache write, 0 cache read"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_401_is_not_retried_and_the_report_says_what_to_fix() {
    let unauthorized = ResponseTemplate::new(401).set_body_json(
        json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
    );
    let server = fake_api("/v1/messages", vec![unauthorized]).await;
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let cmd = claude_fix(
        &env,
        &repo,
        &server,
        "anthropic:claude-sonnet-4-5",
        "agent/401",
        &[],
    );
    let out = run(cmd).await;
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
    let report = env.message(&repo, "agent/401");
    assert!(
        report.contains(
            "Outcome: model-error (the model failed: call 1 to anthropic failed with HTTP 401: \
             authentication_error: invalid x-api-key (check ANTHROPIC_API_KEY))"
        ),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rate_limits_wait_as_told_and_retries_end_at_the_budget() {
    let limited = ResponseTemplate::new(429)
        .insert_header("retry-after", "1")
        .set_body_json(
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
        );
    let mut replies = vec![limited];
    replies.extend(anthropic_fix_replies());
    let server = fake_api("/v1/messages", replies).await;
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let cmd = claude_fix(
        &env,
        &repo,
        &server,
        "anthropic:claude-haiku-4-5",
        "agent/429",
        &[],
    );
    let out = run(cmd).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("rate_limit_error: slow down; retrying in 1.0 s"),
        "{}",
        stderr(&out)
    );

    let overloaded = || {
        ResponseTemplate::new(529).set_body_json(json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
    };
    let server = fake_api(
        "/v1/messages",
        vec![overloaded(), overloaded(), overloaded()],
    )
    .await;
    let cmd = claude_fix(
        &env,
        &repo,
        &server,
        "anthropic:claude-haiku-4-5",
        "agent/529",
        &["--max-retries", "1"],
    );
    let out = run(cmd).await;
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
    assert!(env
        .message(&repo, "agent/529")
        .contains("failed with HTTP 529 after 2 attempts: overloaded_error"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recorded_run_replays_and_says_where_new_requests_diverge() {
    let server = fake_api("/v1/messages", anthropic_fix_replies()).await;
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let recording = env.path().join("session.jsonl");
    let cmd = claude_fix(
        &env,
        &repo,
        &server,
        "anthropic:claude-sonnet-4-5",
        "agent/rec",
        &["--record", recording.to_str().unwrap()],
    );
    assert_eq!(code(&run(cmd).await), 0);
    drop(server);

    // No server, no key: the recording answers.
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
    let report = env.message(&repo, "agent/replayed");
    assert!(
        report.contains("Notes:\n  replay: all 2 requests matched the recording"),
        "{report}"
    );

    let out = env.agent(
        &repo,
        &[
            "fix",
            "Fix the adder, differently",
            "--model",
            &replay,
            "--branch",
            "agent/diverged",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let report = env.message(&repo, "agent/diverged");
    assert!(
        report.contains("replay: call 1 differs from the recording at messages[0].content[0].text"),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_during_a_slow_call_ends_the_run_with_a_report() {
    use std::io::BufRead;
    let slow = ok(anthropic_message(
        "end_turn",
        json!([]),
        anthropic_usage(1, 0, 0, 1),
    ))
    .set_delay(std::time::Duration::from_secs(30));
    let server = fake_api("/v1/messages", vec![slow]).await;
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let mut cmd = claude_fix(
        &env,
        &repo,
        &server,
        "anthropic:claude-sonnet-4-5",
        "agent/slow",
        &[],
    );
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = tokio::task::spawn_blocking(move || {
        let mut child = cmd.spawn().unwrap();
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        // The first line names the run; the second comes after the first test run.
        for _ in 0..2 {
            lines.next().unwrap().unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        interrupt(&child);
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(code(&out), 130);
    assert_eq!(
        env.trailer(&repo, "agent/slow", "Agent-Outcome"),
        "interrupted"
    );
}

#[test]
fn cost_refusal_and_context_budgets_hold_with_a_scripted_model() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    env.git(&repo, &["config", "agent-git.price", "3 15"]);
    let pricey = || {
        json!({"stop_reason": "tool_use", "usage": {"input_tokens": 1_000_000},
               "content": [{"type": "tool_use", "id": "l", "name": "list_files", "input": {}}]})
    };
    let script = env.script("cost.json", json!([pricey(), pricey(), pricey()]));
    let out = env.fix(&repo, &script, "agent/cost", &["--max-cost", "5"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let report = env.message(&repo, "agent/cost");
    assert!(
        report.contains("Outcome: cost-limit (the cost budget of $5.00 was spent)"),
        "{report}"
    );
    assert_eq!(env.trailer(&repo, "agent/cost", "Agent-Cost"), "6.0000 USD");
    assert_eq!(env.trailer(&repo, "agent/cost", "Agent-Turns"), "2");

    let script = env.script(
        "refuse.json",
        json!([{"stop_reason": "refusal", "content": [{"type": "text", "text": "I will not do that."}]}]),
    );
    let out = env.fix(&repo, &script, "agent/refused", &[]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(env
        .message(&repo, "agent/refused")
        .contains("Outcome: refused (the model refused: I will not do that.)"));

    let read = |id: &str, path: &str, input_tokens: u64| {
        json!({"stop_reason": "tool_use", "usage": {"input_tokens": input_tokens},
               "content": [{"type": "tool_use", "id": id, "name": "read_file", "input": {"path": path}}]})
    };
    let search_all = || {
        json!({"stop_reason": "tool_use", "usage": {"input_tokens": 1000},
               "content": [{"type": "tool_use", "id": "a", "name": "search", "input": {"pattern": "."}}]})
    };
    let replies = json!([
        search_all(),
        read("b", "calc.py", 1000),
        read("c", "calc.py", 9000),
        calls("Fix.", vec![fix_add()]),
        end_turn("Done.")
    ]);
    let run = env.fix_scripted(
        &repo,
        "agent/context",
        replies,
        &["--context-window", "10000"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let first_read = run.messages()[2]["content"][0]["content"].as_str().unwrap();
    assert!(
        first_read.starts_with("[removed by the harness to save context"),
        "{first_read}"
    );
    let told = run.messages()[6]["content"][1]["text"].as_str().unwrap();
    assert!(
        told.contains("1 older tool results were replaced"),
        "{told}"
    );
    assert!(env
        .message(&repo, "agent/context")
        .contains("context nearly full -> 1 old tool results dropped"));
}

#[test]
fn the_key_is_not_in_the_test_environment_and_configuration_errors_exit_2() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let run = env.fix_scripted_with(
        &repo,
        "agent/env",
        json!([end_turn("Done.")]),
        &["--test-cmd", "env; exit 1", "--max-turns", "1"],
        |cmd| {
            cmd.env("ANTHROPIC_API_KEY", KEY)
                .env("OPENAI_API_KEY", "sk-openai-secret");
        },
    );
    assert_eq!(run.code(), 1, "{}", run.stderr());
    // The first message carries the test command's output: its whole environment.
    let seen = run.messages()[0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(seen.contains("PATH="), "{seen}");
    assert!(
        !seen.contains(KEY) && !seen.contains("sk-openai-secret"),
        "{seen}"
    );

    let out = env.agent(
        &repo,
        &[
            "fix",
            "--model",
            "anthropic:claude-sonnet-4-5",
            "--branch",
            "agent/nokey",
        ],
    );
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("ANTHROPIC_API_KEY is not set"),
        "{}",
        stderr(&out)
    );
    // A local server needs no key; nothing is sent, the price check comes first.
    let out = env
        .agent_cmd(
            &repo,
            &[
                "fix",
                "--model",
                "openai:llama3.1",
                "--max-cost",
                "1",
                "--context-window",
                "8192",
                "--branch",
                "agent/noprice",
            ],
        )
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("--max-cost needs the price of llama3.1"),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.git(&repo, &["branch", "--list", "agent/no*"]), "");

    let out = env.agent(&repo, &["fix", "--print-system-prompt"]);
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains("Test files and test-runner configuration are read-only"));
}

/// A reply that calls one tool.
fn anthropic_call(id: &str, name: &str, input: Value) -> ResponseTemplate {
    ok(anthropic_message(
        "tool_use",
        json!([{"type": "tool_use", "id": id, "name": name, "input": input}]),
        anthropic_usage(10, 0, 0, 10),
    ))
}

/// The time budget cuts a model call under way, and a command the model runs cannot go past
/// it; the final test run still comes, and the report says which budget ended the run.
#[tokio::test(flavor = "multi_thread")]
async fn the_time_budget_cuts_a_slow_call_and_bounds_a_command() {
    let sleeper = anthropic_call(
        "toolu_sleep",
        "run_command",
        json!({"command": "sleep 60", "timeout_secs": 120}),
    );
    let slow = ok(anthropic_message(
        "end_turn",
        json!([{"type": "text", "text": "Done."}]),
        anthropic_usage(1, 0, 0, 1),
    ))
    .set_delay(std::time::Duration::from_secs(60));
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let transcript = env.path().join("t.json");
    let transcript_arg = transcript.display().to_string();
    // The slow call: cut at the deadline.
    let server = fake_api("/v1/messages", vec![slow.clone()]).await;
    let model = "anthropic:claude-sonnet-4-5";
    let extra = ["--max-time", "3s"];
    let out = run(claude_fix(
        &env,
        &repo,
        &server,
        model,
        "agent/slow",
        &extra,
    ))
    .await;
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_eq!(
        env.trailer(&repo, "agent/slow", "Agent-Outcome"),
        "time-limit"
    );
    let report = env.message(&repo, "agent/slow");
    assert!(
        report.contains("time-limit (the time budget of 3s was spent)"),
        "{report}"
    );
    assert!(
        report.contains("1 passed, 1 failed"),
        "the final test run: {report}"
    );

    // The command: killed when the run's time is up, not when its own timeout is.
    let server = fake_api("/v1/messages", vec![sleeper, slow]).await;
    let extra = ["--max-time", "4s", "--transcript", &transcript_arg];
    let out = run(claude_fix(
        &env,
        &repo,
        &server,
        model,
        "agent/sleep",
        &extra,
    ))
    .await;
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let said = std::fs::read_to_string(&transcript).unwrap();
    let killed = said
        .split("killed after ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|secs| secs.parse::<u64>().ok());
    assert!(killed.is_some_and(|secs| secs <= 4), "{said}");
    assert_eq!(
        env.trailer(&repo, "agent/sleep", "Agent-Outcome"),
        "time-limit"
    );
}

/// When the time runs out after a right fix, the final test run decides: passed, exit 0, and
/// the report says the conversation ended on the time budget.
#[tokio::test(flavor = "multi_thread")]
async fn a_right_fix_passes_when_the_time_runs_out_after_it() {
    let fix = anthropic_call(
        "toolu_fix",
        "edit_file",
        json!({"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}),
    );
    let slow = ok(anthropic_message(
        "end_turn",
        json!([{"type": "text", "text": "Done."}]),
        anthropic_usage(1, 0, 0, 1),
    ))
    .set_delay(std::time::Duration::from_secs(60));
    let server = fake_api("/v1/messages", vec![fix, slow]).await;
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let model = "anthropic:claude-sonnet-4-5";
    let extra = ["--max-time", "8s"];
    let out = run(claude_fix(
        &env,
        &repo,
        &server,
        model,
        "agent/timed",
        &extra,
    ))
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let report = env.message(&repo, "agent/timed");
    assert!(
        report.contains("the conversation ended early: the time budget was spent"),
        "{report}"
    );
    assert_eq!(env.trailer(&repo, "agent/timed", "Agent-Outcome"), "passed");
}

/// A fake of the Messages API that refuses what the real one refuses around thinking, then
/// answers with the next reply of its list.
struct StrictAnthropic(Mutex<VecDeque<ResponseTemplate>>);

/// Why the real API would refuse `body` (sent with `beta` as its `anthropic-beta`), if it would.
fn anthropic_refusal(body: &Value, beta: &str) -> Option<String> {
    let thinking = &body["thinking"];
    let on = matches!(thinking["type"].as_str(), Some("enabled" | "adaptive"));
    if on && !body["temperature"].is_null() {
        return Some("`temperature` may only be set to 1 when thinking is enabled".into());
    }
    if thinking["type"] == "enabled" {
        let budget = thinking["budget_tokens"].as_u64().unwrap_or(0);
        if budget < 1024 {
            return Some("thinking.budget_tokens: must be at least 1024".into());
        }
        let interleaved = beta.contains("interleaved-thinking-2025-05-14");
        if !interleaved && budget >= body["max_tokens"].as_u64().unwrap_or(0) {
            return Some("`max_tokens` must be greater than `thinking.budget_tokens`".into());
        }
        if body["model"] == "claude-opus-4-7" {
            return Some("thinking.type.enabled is not supported for this model".into());
        }
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        let blocks = message["content"].as_array().cloned().unwrap_or_default();
        for block in &blocks {
            let signed = block["signature"].as_str().is_some_and(|s| !s.is_empty());
            if block["type"] == "thinking" && !signed {
                return Some("thinking block: signature: Field required".into());
            }
        }
        let calls = blocks.iter().any(|b| b["type"] == "tool_use");
        let first = blocks
            .first()
            .map(|b| b["type"].clone())
            .unwrap_or_default();
        if on && message["role"] == "assistant" && calls && first != "thinking" {
            return Some("a final assistant message must start with a thinking block".into());
        }
    }
    None
}

impl Respond for StrictAnthropic {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let beta = request
            .headers
            .get("anthropic-beta")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if let Some(why) = anthropic_refusal(&body, beta) {
            return ResponseTemplate::new(400).set_body_json(json!({
                "type": "error", "error": {"type": "invalid_request_error", "message": why}
            }));
        }
        let next = self.0.lock().unwrap().pop_front();
        next.unwrap_or_else(|| ResponseTemplate::new(500))
    }
}

/// A thinking reply that fixes add(), then the end of the turn.
fn thinking_fix_replies() -> Vec<ResponseTemplate> {
    vec![
        ok(anthropic_message(
            "tool_use",
            json!([
                {"type": "thinking", "thinking": "add() subtracts.", "signature": "sig-01"},
                {"type": "tool_use", "id": "toolu_01", "name": "edit_file",
                 "input": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}
            ]),
            anthropic_usage(20, 0, 0, 300),
        )),
        ok(anthropic_message(
            "end_turn",
            json!([
                {"type": "thinking", "thinking": "Done.", "signature": "sig-02"},
                {"type": "text", "text": "Fixed add()."}
            ]),
            anthropic_usage(30, 0, 0, 40),
        )),
    ]
}

async fn strict_anthropic() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(StrictAnthropic(Mutex::new(thinking_fix_replies().into())))
        .mount(&server)
        .await;
    server
}

/// Thinking as each family takes it: a budget the reply's limit makes room for, the
/// interleaved header where the model thinks between tool calls, thinking blocks sent back
/// with their signatures, and a setting the model cannot take refused before any request.
#[tokio::test(flavor = "multi_thread")]
async fn thinking_is_asked_as_each_model_takes_it_and_its_blocks_go_back_signed() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    // Manual thinking, not interleaved: the limit must exceed the budget.
    let server = strict_anthropic().await;
    let extra = ["--thinking", "2000", "--max-tokens", "1500", "--json"];
    let out = run(claude_fix(
        &env,
        &repo,
        &server,
        "anthropic:claude-3-7-sonnet-20250219",
        "agent/think",
        &extra,
    ))
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    let first: Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(
        first["thinking"],
        json!({"type": "enabled", "budget_tokens": 2000})
    );
    assert_eq!(first["max_tokens"], 3500);
    assert!(requests[0].headers.get("anthropic-beta").is_none());
    let second: Value = serde_json::from_slice(&requests[1].body).unwrap();
    assert_eq!(
        second["messages"][1]["content"][0],
        json!({"type": "thinking", "thinking": "add() subtracts.", "signature": "sig-01"})
    );
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        json["reasoning"]["setting"],
        "thinking, 2000 tokens a reply"
    );
    assert!(env.message(&repo, "agent/think").contains(
        "Reasoning: thinking, 2000 tokens a reply (its tokens are counted in the output)"
    ));

    // A Claude 4 model by default: a budget, between tool calls too.
    let server = strict_anthropic().await;
    let model = "anthropic:claude-sonnet-4-5";
    let out = run(claude_fix(
        &env,
        &repo,
        &server,
        model,
        "agent/default",
        &[],
    ))
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let requests = server.received_requests().await.unwrap();
    let first: Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(first["thinking"]["type"], "enabled");
    assert!(first["max_tokens"].as_u64() > first["thinking"]["budget_tokens"].as_u64());
    assert_eq!(
        requests[0].headers.get("anthropic-beta").unwrap(),
        "interleaved-thinking-2025-05-14"
    );

    // An adaptive-only model: adaptive by default, a budget refused before any request.
    let server = strict_anthropic().await;
    let model = "anthropic:claude-opus-4-7";
    let extra = ["--thinking", "4000"];
    let out = run(claude_fix(
        &env,
        &repo,
        &server,
        model,
        "agent/budget",
        &extra,
    ))
    .await;
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("thinks adaptively only"),
        "{}",
        stderr(&out)
    );
    assert!(server.received_requests().await.unwrap().is_empty());
    let out = run(claude_fix(
        &env,
        &repo,
        &server,
        model,
        "agent/adaptive",
        &[],
    ))
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let requests = server.received_requests().await.unwrap();
    let first: Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(first["thinking"], json!({"type": "adaptive"}));

    // Off: nothing is asked.
    let server = strict_anthropic().await;
    let extra = ["--thinking", "off"];
    let out = run(claude_fix(&env, &repo, &server, model, "agent/off", &extra)).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let requests = server.received_requests().await.unwrap();
    let first: Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert!(first.get("thinking").is_none(), "{first}");
}

/// A fake of Chat Completions that refuses a reasoning effort for a model that has none.
struct StrictOpenAi(Mutex<VecDeque<ResponseTemplate>>);

impl Respond for StrictOpenAi {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let model = body["model"].as_str().unwrap_or("");
        let reasoning = model.starts_with("gpt-5") || model.starts_with('o');
        if body.get("reasoning_effort").is_some() && !reasoning {
            return ResponseTemplate::new(400).set_body_json(json!({"error": {
                "message": "Unrecognized request argument supplied: reasoning_effort",
                "type": "invalid_request_error", "param": "reasoning_effort", "code": null
            }}));
        }
        let next = self.0.lock().unwrap().pop_front();
        next.unwrap_or_else(|| ResponseTemplate::new(500))
    }
}

fn openai_reply(message: Value, finish: &str, reasoning: u64) -> ResponseTemplate {
    ok(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-5-mini",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 50 + reasoning, "total_tokens": 150 + reasoning,
                  "completion_tokens_details": {"reasoning_tokens": reasoning}}
    }))
}

/// A reasoning effort goes to a reasoning model, its reasoning tokens are reported, and an
/// effort for a model that has none is refused before any request.
#[tokio::test(flavor = "multi_thread")]
async fn a_reasoning_effort_is_sent_to_reasoning_models_only_and_its_tokens_reported() {
    let edit = json!({"role": "assistant", "content": null, "tool_calls": [{
        "id": "call_1", "type": "function", "function": {"name": "edit_file",
        "arguments": "{\"path\":\"calc.py\",\"old_text\":\"return a - b\",\"new_text\":\"return a + b\"}"}}]});
    let done = json!({"role": "assistant", "content": "Fixed add()."});
    let replies = vec![
        openai_reply(edit, "tool_calls", 120),
        openai_reply(done, "stop", 30),
    ];
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(StrictOpenAi(Mutex::new(replies.into())))
        .mount(&server)
        .await;
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let args = [
        "--model",
        "openai:gpt-5-mini",
        "--reasoning-effort",
        "minimal",
        "--branch",
        "agent/effort",
        "--json",
        "--context-window",
        "128000",
    ];
    let out = run(local_fix(&env, &repo, &server.uri(), &args)).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let requests = server.received_requests().await.unwrap();
    let first: Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(first["reasoning_effort"], "minimal");
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        json["reasoning"],
        json!({"setting": "reasoning effort minimal", "reasoning_tokens": 150})
    );
    assert!(env
        .message(&repo, "agent/effort")
        .contains("Reasoning: reasoning effort minimal (150 reasoning tokens, of the output)"));

    let args = [
        "--model",
        "openai:gpt-4.1",
        "--reasoning-effort",
        "high",
        "--context-window",
        "128000",
    ];
    let out = run(local_fix(&env, &repo, &server.uri(), &args)).await;
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a reasoning model"),
        "{}",
        stderr(&out)
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}
