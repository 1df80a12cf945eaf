//! Prompt caching over a whole run: every request the fake Anthropic API receives starts with
//! what the previous request cached, unchanged, and `--json` says how much input came from the
//! cache.

use crate::common::*;
use crate::models::*;
use serde_json::{json, Value};

/// One reply: its stop reason, its content blocks, and (input, cache write, cache read,
/// output) tokens.
fn reply(stop: &str, content: Value, usage: (u64, u64, u64, u64)) -> Value {
    let (input, write, read, output) = usage;
    anthropic_message(stop, content, anthropic_usage(input, write, read, output))
}

fn tool(id: &str, name: &str, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

/// Six turns that grow the conversation every way a run does: a thinking block and two calls
/// in one reply, a command, a failing test run, an edit that fixes nothing, an end of turn
/// the harness answers with the failing tests, an empty text block, the fix, and the end.
fn replies() -> Vec<Value> {
    vec![
        reply(
            "tool_use",
            json!([
                {"type": "thinking", "thinking": "Look first.", "signature": "sig-1"},
                {"type": "text", "text": "Reading calc.py and the Python version."},
                tool("toolu_01", "read_file", json!({"path": "calc.py"})),
                tool("toolu_02", "run_command", json!({"command": "python3 --version"}))
            ]),
            (20, 1500, 0, 60),
        ),
        reply(
            "tool_use",
            json!([tool("toolu_03", "run_tests", json!({}))]),
            (30, 200, 1500, 40),
        ),
        reply(
            "tool_use",
            json!([
                {"type": "text", "text": "Note what add() should do."},
                tool("toolu_04", "edit_file", json!({"path": "calc.py",
                    "old_text": "def add(a, b):\n", "new_text": "def add(a, b):\n    # the sum\n"}))
            ]),
            (25, 150, 1700, 30),
        ),
        reply(
            "end_turn",
            json!([{"type": "text", "text": "Done, I think."}]),
            (10, 100, 1850, 5),
        ),
        reply(
            "tool_use",
            json!([
                {"type": "text", "text": ""},
                tool("toolu_05", "edit_file", json!({"path": "calc.py",
                    "old_text": "return a - b", "new_text": "return a + b"}))
            ]),
            (15, 120, 1950, 30),
        ),
        reply(
            "end_turn",
            json!([{"type": "text", "text": "add() adds now."}]),
            (10, 80, 2070, 5),
        ),
    ]
}

/// A request as the API's cache reads it: tools, then system, then each message's blocks, in
/// that order (the order the API builds its prefix in), each block on a line of its own that
/// says where it sits (`tools[0]`, `system[0]`, `messages[2] user [1]`) beside its JSON. The
/// `cache_control` marker is taken off each block, and whether the block had one is returned
/// beside it: a marker says where a cache entry ends and is not part of what it holds (the
/// newest message's breakpoint moves on each turn, and the previous entry is still read).
fn cached_prefix(body: &Value) -> Vec<(String, bool)> {
    let line = |place: String, block: &Value| {
        let mut block = block.clone();
        let marked = block
            .as_object_mut()
            .and_then(|b| b.remove("cache_control"))
            .is_some();
        (format!("{place} {block}"), marked)
    };
    let mut lines = Vec::new();
    for (i, tool) in body["tools"].as_array().unwrap().iter().enumerate() {
        lines.push(line(format!("tools[{i}]"), tool));
    }
    for (i, block) in body["system"].as_array().unwrap().iter().enumerate() {
        lines.push(line(format!("system[{i}]"), block));
    }
    for (m, message) in body["messages"].as_array().unwrap().iter().enumerate() {
        let role = message["role"].as_str().unwrap();
        for (b, block) in message["content"].as_array().unwrap().iter().enumerate() {
            lines.push(line(format!("messages[{m}] {role} [{b}]"), block));
        }
    }
    lines
}

/// Request `i` keeps, byte for byte, every block of request `i - 1` up to and including that
/// request's last breakpoint: the API then reads all of it from the cache.
fn assert_prefix_kept(requests: &[Value]) {
    for (i, pair) in requests.windows(2).enumerate() {
        let (before, after) = (cached_prefix(&pair[0]), cached_prefix(&pair[1]));
        let breakpoints = after.iter().filter(|(_, marked)| *marked).count();
        assert!(breakpoints <= 4, "request {}: the API allows 4", i + 1);
        let last = before.iter().rposition(|(_, marked)| *marked).unwrap();
        for (j, (line, _)) in before[..=last].iter().enumerate() {
            let now = after.get(j).map(|(l, _)| l.as_str());
            assert_eq!(
                now,
                Some(line.as_str()),
                "request {} changed block {j} of what request {i} cached",
                i + 1
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_request_keeps_what_the_previous_one_cached_and_json_gives_the_cache_share() {
    let server = fake_api("/v1/messages", replies().into_iter().map(ok).collect()).await;
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let recording = env.path().join("run.jsonl");
    let mut cmd = claude_fix(
        &env,
        &repo,
        &server,
        "anthropic:claude-sonnet-4-5",
        "agent/cache",
        &["--json", "--record", recording.to_str().unwrap()],
    );
    cmd.env("PATH", pytest_path());
    let out = run(cmd).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // Shrinking a conversation that nears the window rewrites old tool results, and so breaks
    // the prefix on purpose; this run stays far from the window, so nothing may change.
    assert!(
        !stderr(&out).contains("context nearly full"),
        "{}",
        stderr(&out)
    );

    let requests: Vec<Value> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert_eq!(requests.len(), 6, "one request a reply");
    // A recording holds the requests too, so a recorded real session can be checked the same way.
    let recorded: Vec<Value> = std::fs::read_to_string(&recording)
        .unwrap()
        .lines()
        .skip(1)
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["request"].take())
        .collect();
    let unstreamed: Vec<Value> = requests
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.as_object_mut().unwrap().remove("stream");
            r
        })
        .collect();
    assert_eq!(
        recorded, unstreamed,
        "recorded without `stream`, else the same"
    );
    let last = requests[5]["messages"].as_array().unwrap();
    let said = |m: &Value| m.to_string();
    assert!(said(&last[4]).contains("test_add"), "the failing run_tests");
    assert!(
        said(&last[8]).contains("They still fail"),
        "the harness's answer"
    );
    assert_prefix_kept(&requests);

    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let (input, write, read) = (110.0, 2150.0, 9070.0);
    assert_eq!(report["usage"]["cache_read_input_tokens"], 9070);
    assert_eq!(
        report["usage"]["cache_read_share"],
        json!(read / (input + write + read))
    );
}

#[test]
fn a_changed_block_before_the_breakpoint_is_caught() {
    let request = |text: &str, newest: Value| {
        json!({
            "tools": [{"name": "run_tests"}],
            "system": [{"type": "text", "text": "Be careful.", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}, newest]
        })
    };
    let marked = json!({"role": "assistant", "content": [
        {"type": "text", "text": "ok", "cache_control": {"type": "ephemeral"}}]});
    let unmarked = json!({"role": "assistant", "content": [{"type": "text", "text": "ok"}]});
    let first = request("Task", marked);
    assert_prefix_kept(&[first.clone(), request("Task", unmarked.clone())]);
    let changed = std::panic::catch_unwind(|| {
        assert_prefix_kept(&[first, request("Task at 12:00", unmarked)]);
    });
    assert!(
        changed.is_err(),
        "a timestamp in the first message breaks the cache"
    );
}
