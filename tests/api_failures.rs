//! What real APIs and local servers do when things go wrong, against a fake server on
//! loopback whose bodies are the providers' own: a prompt too long, a window about to
//! overflow, reasoning models' token parameter, empty replies, bodies that are not replies,
//! error pages, dead servers, and servers that must be asked for their context window.

use crate::common::*;
use crate::models::*;
use serde_json::{json, Value};
use std::process::Command;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A file whose read fills the context: 200 lines of 60 bytes.
fn big_text() -> String {
    (0..200)
        .map(|i| format!("{i:04} {}\n", "x".repeat(55)))
        .collect()
}

fn big_repo(env: &TestEnv) -> std::path::PathBuf {
    env.repo(
        "big",
        &[
            ("calc.py", CALC),
            ("test_calc.py", TEST_CALC),
            ("data.txt", &big_text()),
        ],
    )
}

fn fix_input() -> Value {
    json!({"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"})
}

async fn bodies(server: &MockServer, route: &str) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == route)
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

fn chat_reply(message: Value, finish: &str, prompt_tokens: u64) -> ResponseTemplate {
    ok(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 20, "total_tokens": prompt_tokens + 20}
    }))
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}})
}

const CUT: &str = "[cut by the harness to fit the context window]";

#[tokio::test(flavor = "multi_thread")]
async fn a_prompt_too_long_shrinks_the_conversation_and_the_run_goes_on() {
    let too_long = ResponseTemplate::new(400).set_body_json(json!({"type": "error",
        "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"},
        "request_id": "req_011"}));
    let replies = vec![
        ok(anthropic_message(
            "tool_use",
            json!([{"type": "tool_use", "id": "toolu_read", "name": "read_file", "input": {"path": "data.txt"}}]),
            anthropic_usage(20, 0, 0, 10),
        )),
        too_long,
        ok(anthropic_message(
            "tool_use",
            json!([{"type": "text", "text": "add() subtracts."},
                   {"type": "tool_use", "id": "toolu_fix", "name": "edit_file", "input": fix_input()}]),
            anthropic_usage(20, 0, 0, 10),
        )),
        ok(anthropic_message(
            "end_turn",
            json!([{"type": "text", "text": "Fixed."}]),
            anthropic_usage(20, 0, 0, 5),
        )),
    ];
    let server = fake_api("/v1/messages", replies).await;
    let env = TestEnv::new();
    let repo = big_repo(&env);
    let cmd = claude_fix(
        &env,
        &repo,
        &server,
        "anthropic:claude-sonnet-4-5",
        "agent/long",
        &[],
    );
    let out = run(cmd).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(env.show(&repo, "agent/long:calc.py"), CALC_FIXED);

    let sent = bodies(&server, "/v1/messages").await;
    assert_eq!(sent.len(), 4, "the refused request is sent again, shrunk");
    let result = |body: &Value| body["messages"][2]["content"][0]["content"].clone();
    assert!(result(&sent[1]).as_str().unwrap().len() > 12_000);
    let shrunk = result(&sent[2]);
    assert!(shrunk.as_str().unwrap().ends_with(CUT), "{shrunk}");
    let told = &sent[2]["messages"][2]["content"][1]["text"];
    assert!(
        told.as_str()
            .unwrap()
            .contains("1 long tool results were cut to their first 2000 bytes"),
        "{told}"
    );
    let report = env.message(&repo, "agent/long");
    for line in [
        "prompt too long -> prompt is too long: 210000 tokens > 200000 maximum",
        "context nearly full -> 1 long tool results cut",
    ] {
        assert!(report.contains(line), "{line}\n{report}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_that_would_overflow_the_window_is_shrunk_before_it_is_sent() {
    // One turn reads the big file twice: 25 KB of results for a 4096-token window. The last
    // reply's usage alone (1,500 tokens) would not show it.
    let replies = vec![
        chat_reply(
            json!({"role": "assistant", "content": null, "tool_calls": [
                call("call_1", "read_file", json!({"path": "data.txt"})),
                call("call_2", "read_file", json!({"path": "data.txt", "start_line": 2}))]}),
            "tool_calls",
            1500,
        ),
        chat_reply(
            json!({"role": "assistant", "content": "add() subtracts.", "tool_calls": [
                call("call_3", "edit_file", fix_input())]}),
            "tool_calls",
            2500,
        ),
        chat_reply(
            json!({"role": "assistant", "content": "Fixed."}),
            "stop",
            2600,
        ),
    ];
    let server = fake_api("/v1/chat/completions", replies).await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ok(json!({"object": "list", "data": [
            {"id": "qwen2.5-coder", "object": "model", "owned_by": "vllm", "max_model_len": 4096}]})))
        .mount(&server)
        .await;
    let env = TestEnv::new();
    let repo = big_repo(&env);
    let cmd = local_fix(
        &env,
        &repo,
        &server.uri(),
        &[
            "--model",
            "openai:qwen2.5-coder",
            "--branch",
            "agent/window",
        ],
    );
    let out = run(cmd).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    let sent = bodies(&server, "/v1/chat/completions").await;
    assert_eq!(sent.len(), 3, "no request was refused");
    let second = sent[1]["messages"].as_array().unwrap();
    for tool in second.iter().filter(|m| m["role"] == "tool") {
        let text = tool["content"].as_str().unwrap();
        assert!(text.ends_with(CUT) && text.len() < 2_100, "{text}");
    }
    assert!(env
        .message(&repo, "agent/window")
        .contains("context nearly full -> 2 long tool results cut"));
}

#[tokio::test(flavor = "multi_thread")]
async fn reasoning_models_empty_replies_and_bodies_that_are_not_replies() {
    let replies = vec![
        // A 200 whose body is no reply is retried like a 5xx, never taken as an ended turn.
        ok(json!({})),
        // An empty end of turn: the harness runs the tests and answers.
        chat_reply(json!({"role": "assistant", "content": ""}), "stop", 900),
        chat_reply(
            json!({"role": "assistant", "content": null, "tool_calls": [call("call_fix", "edit_file", fix_input())]}),
            "tool_calls",
            1000,
        ),
        chat_reply(
            json!({"role": "assistant", "content": "Fixed add()."}),
            "stop",
            1100,
        ),
    ];
    let server = fake_api("/v1/chat/completions", replies).await;
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let mut cmd = local_fix(
        &env,
        &repo,
        &server.uri(),
        &[
            "--model",
            "openai:gpt-5-mini",
            "--context-window",
            "400000",
            "--branch",
            "agent/gpt5",
        ],
    );
    cmd.env("OPENAI_API_KEY", "sk-test");
    let out = run(cmd).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "call 1 to openai: unreadable response: openai: no choices in the response; retrying"
        ),
        "{}",
        stderr(&out)
    );

    let sent = bodies(&server, "/v1/chat/completions").await;
    assert_eq!(sent.len(), 4);
    for body in &sent {
        assert_eq!(body["max_completion_tokens"], 8192, "{body}");
        assert!(body.get("max_tokens").is_none(), "{body}");
    }
    let third = sent[2]["messages"].as_array().unwrap();
    assert_eq!(
        third[2],
        json!({"role": "assistant", "content": "(no content)"})
    );
    assert!(third[3]["content"]
        .as_str()
        .unwrap()
        .starts_with("You ended your turn, so the harness ran the tests. They still fail."));
    assert_eq!(env.show(&repo, "agent/gpt5:calc.py"), CALC_FIXED);
}

/// Runs `fix` on branch `branch` with no retries, expects a model error, and returns the
/// report.
async fn failed_run(env: &TestEnv, mut cmd: Command, branch: &str) -> String {
    let repo = env.path().join("calc");
    cmd.args(["--max-retries", "0", "--branch", branch]);
    let out = run(cmd).await;
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    env.message(&repo, branch)
}

fn claude_fix_on(env: &TestEnv, repo: &std::path::Path, server: &MockServer) -> Command {
    let mut cmd = env.agent_cmd(
        repo,
        &[
            "fix",
            "Fix the adder",
            "--model",
            "anthropic:claude-haiku-4-5",
        ],
    );
    cmd.env("ANTHROPIC_API_KEY", KEY)
        .env("ANTHROPIC_BASE_URL", server.uri());
    cmd
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_quote_the_server_and_say_what_to_check() {
    let env = TestEnv::new();
    let repo = env.calc_repo();

    let nginx = ResponseTemplate::new(502).set_body_raw(
        "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad \
         Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n",
        "text/html",
    );
    let server = fake_api("/v1/messages", vec![nginx]).await;
    let cmd = claude_fix_on(&env, &repo, &server);
    let report = failed_run(&env, cmd, "agent/html").await;
    assert!(
        report.contains(
            "call 1 to anthropic failed with HTTP 502: 502 Bad Gateway (a web page came back, \
             not the API's answer: check ANTHROPIC_BASE_URL and any proxy in between)"
        ),
        "{report}"
    );

    let error_object = || {
        ok(
            json!({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}),
        )
    };
    let server = fake_api("/v1/messages", vec![error_object(), error_object()]).await;
    let cmd = claude_fix_on(&env, &repo, &server);
    let report = failed_run(&env, cmd, "agent/error200").await;
    assert!(
        report.contains(
            "unreadable response: anthropic: an error came with a success status: api_error: \
             Internal server error"
        ),
        "{report}"
    );

    let vllm = ResponseTemplate::new(404).set_body_json(json!({"object": "error",
        "message": "The model `qwen` does not exist.", "type": "NotFoundError", "param": null, "code": 404}));
    let server = fake_api("/v1/chat/completions", vec![vllm]).await;
    let cmd = local_fix(
        &env,
        &repo,
        &server.uri(),
        &["--model", "openai:qwen", "--context-window", "8192"],
    );
    let report = failed_run(&env, cmd, "agent/vllm404").await;
    assert!(
        report.contains(
            "failed with HTTP 404: NotFoundError: The model `qwen` does not exist. (check the \
             model name `qwen` and OPENAI_BASE_URL)"
        ),
        "{report}"
    );

    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dead = format!("http://127.0.0.1:{port}");
    let cmd = local_fix(
        &env,
        &repo,
        &dead,
        &["--model", "openai:qwen", "--context-window", "8192"],
    );
    let report = failed_run(&env, cmd, "agent/refused").await;
    assert!(
        report.contains(&format!(
            "call 1 to openai: connection refused by {dead}: is the server running, and is the \
             URL right?"
        )),
        "{report}"
    );

    let slow = chat_reply(json!({"role": "assistant", "content": "x"}), "stop", 1)
        .set_delay(std::time::Duration::from_secs(20));
    let server = fake_api("/v1/chat/completions", vec![slow]).await;
    let mut cmd = local_fix(
        &env,
        &repo,
        &server.uri(),
        &["--model", "openai:qwen", "--context-window", "8192"],
    );
    cmd.args(["--request-timeout", "1"]);
    let report = failed_run(&env, cmd, "agent/timeout").await;
    assert!(
        report.contains(&format!(
            "call 1 to openai: no answer in time from {} (raise --request-timeout",
            server.uri()
        )),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_local_server_is_asked_for_its_context_window_or_the_user_is() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let server = fake_api(
        "/v1/chat/completions",
        vec![chat_reply(
            json!({"role": "assistant", "content": "Done."}),
            "stop",
            10,
        )],
    )
    .await;
    // Ollama: its model list names no window, and /api/show only the model's own, which is
    // not the window Ollama runs it with: the user is asked, nothing starts.
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ok(json!({"object": "list", "data": [
            {"id": "llama3.1:8b", "object": "model", "created": 1, "owned_by": "library"}]})))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/show"))
        .respond_with(ok(
            json!({"modelfile": "FROM llama3.1:8b", "parameters": "stop \"<|eot_id|>\"",
            "template": "", "details": {"family": "llama", "parameter_size": "8.0B"},
            "model_info": {"general.architecture": "llama", "llama.context_length": 131072}}),
        ))
        .mount(&server)
        .await;
    let ollama = |branch: &str| {
        local_fix(
            &env,
            &repo,
            &server.uri(),
            &[
                "--model",
                "openai:llama3.1:8b",
                "--max-turns",
                "1",
                "--branch",
                branch,
            ],
        )
    };
    let out = run(ollama("agent/unloaded")).await;
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "Ollama does not say the window it runs `llama3.1:8b` with (Ollama silently cuts \
             prompts longer than the window it runs a model with"
        ),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("pass --context-window TOKENS"),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.git(&repo, &["branch", "--list", "agent/unloaded"]), "");
    assert_eq!(
        bodies(&server, "/api/show").await,
        vec![json!({"model": "llama3.1:8b"})]
    );

    // Loaded, the model shows the window it runs with; a small one lowers max_tokens.
    Mock::given(method("GET"))
        .and(path("/api/ps"))
        .respond_with(ok(
            json!({"models": [{"name": "llama3.1:8b", "model": "llama3.1:8b",
            "size": 6_654_289_920u64, "context_length": 16384}]}),
        ))
        .mount(&server)
        .await;
    let out = run(ollama("agent/ollama")).await;
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let warning = "Ollama silently cuts prompts longer than the window it runs a model with; \
                   agent-git keeps the conversation under 16384";
    assert!(stderr(&out).contains(warning), "{}", stderr(&out));
    let report = env.message(&repo, "agent/ollama");
    for note in [
        "context window: 16384 tokens, from Ollama's /api/ps (the loaded model's context_length)",
        warning,
        "max_tokens lowered from 8192 to 4096, a quarter of the 16384-token context window",
    ] {
        assert!(report.contains(note), "{note}\n{report}");
    }
    let chat = bodies(&server, "/v1/chat/completions").await;
    assert_eq!(chat[0]["max_tokens"], 4096);

    // A server that says nothing: the user must, and nothing is started; unless the model is
    // one whose window is published (a gateway in front of OpenAI's models).
    let mute = MockServer::start().await;
    let out = run(local_fix(
        &env,
        &repo,
        &mute.uri(),
        &["--model", "openai:llama3.1:8b", "--branch", "agent/mute"],
    ))
    .await;
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "the server at OPENAI_BASE_URL did not say the context window of `llama3.1:8b` \
             (asked /v1/models, /props, /api/ps and /api/show); pass --context-window TOKENS"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.git(&repo, &["branch", "--list", "agent/mute"]), "");
    // No server at all: that is what is said, not a missing window.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let out = run(local_fix(
        &env,
        &repo,
        &gone,
        &["--model", "openai:llama3.1:8b", "--branch", "agent/gone"],
    ))
    .await;
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("cannot reach the model server at {gone}/v1: "))
            && stderr(&out).contains("start it, or fix OPENAI_BASE_URL")
            && !stderr(&out).contains("--context-window"),
        "{}",
        stderr(&out)
    );
    // A gateway that counts no tokens: the report says the cost is unknown.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ok(
            json!({"id": "c", "object": "chat.completion", "choices": [{"index": 0,
            "message": {"role": "assistant", "content": "Done."}, "finish_reason": "stop"}]}),
        ))
        .mount(&mute)
        .await;
    let out = run(local_fix(
        &env,
        &repo,
        &mute.uri(),
        &[
            "--model",
            "openai:gpt-4o-mini",
            "--max-turns",
            "1",
            "--branch",
            "agent/gateway",
        ],
    ))
    .await;
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let report = env.message(&repo, "agent/gateway");
    for note in [
        "context window: 128000 tokens, from the published window of gpt-4o-mini (the server did not say)",
        "1 replies (of 1 calls) came without a token count: their cost is not in the total, and \
         --max-cost cannot count it",
    ] {
        assert!(report.contains(note), "{note}\n{report}");
    }

    // OpenAI's own API without a key: refused at once.
    let out = env.agent(
        &repo,
        &["fix", "--model", "openai:gpt-5", "--branch", "agent/nokey"],
    );
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("OPENAI_API_KEY is not set"),
        "{}",
        stderr(&out)
    );
}

/// A refused request's own words reach `--json` as they reach the report, with the setting to
/// change when the server refuses the name of the token limit.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_request_says_why_in_json_and_names_the_setting() {
    let refusal = json!({"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"}});
    let server = fake_api(
        "/v1/chat/completions",
        vec![ResponseTemplate::new(400).set_body_json(refusal)],
    )
    .await;
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let cmd = local_fix(
        &env,
        &repo,
        &server.uri(),
        &[
            "--model",
            "openai:qwen2.5-coder",
            "--context-window",
            "32768",
            "--branch",
            "agent/refused",
            "--json",
        ],
    );
    let out = run(cmd).await;
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let reason = v["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("Use 'max_completion_tokens' instead"),
        "{v}"
    );
    assert!(
        reason.contains("git config agent-git.tokenParam max_completion_tokens"),
        "{v}"
    );
    assert!(v["notes"].is_array(), "{v}");
}
