//! The whole run a user waits for: `agent-git fix` with a model of three replies (read
//! calc.py, edit it, end the turn) served by a loopback fake of the Anthropic API, so that
//! the real HTTP and streaming path runs. Each sample is a fresh clone of the repository with
//! a failing test, fixed twice: a first run (empty pool, no clean room yet) and a second one
//! on the same clone. Beside them, alternating, the floors of what any run must do:
//!
//! - F1 = `git worktree add` of the repository + one direct run of the test command in it
//!   (beside start → first model request of a first run);
//! - F2 = one direct run of the test command + one `git commit` (beside last reply → exit);
//! - one direct test run + 0.1 s (beside a second run's start → first request).

use crate::common::{self, git, git_command, Options, Repo, Stats};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What `agent-git tests` names as the command for the repository's unittest tests, and what
/// a user runs by hand.
const TEST_COMMAND: &str = "python3 -m unittest discover";
const BUG: &str = "def add(a, b):\n    return a - b\n";

/// One event of a server-sent event stream.
fn event(name: &str, data: serde_json::Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The Anthropic event stream of a reply of one content block.
fn stream_of(stop_reason: &str, block: serde_json::Value) -> String {
    use serde_json::json;
    let usage = json!({"input_tokens": 900, "output_tokens": 1,
                       "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
    let message = json!({"id": "msg_bench", "type": "message", "role": "assistant",
                         "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
                         "stop_sequence": null, "usage": usage});
    let (start, delta) = match block["type"].as_str() {
        Some("text") => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": block["text"]}),
        ),
        _ => {
            let mut start = block.clone();
            start["input"] = json!({});
            let partial = block["input"].to_string();
            (
                start,
                json!({"type": "input_json_delta", "partial_json": partial}),
            )
        }
    };
    [
        event(
            "message_start",
            json!({"type": "message_start", "message": message}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": start}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ),
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason,
                   "stop_sequence": null}, "usage": {"output_tokens": 40}}),
        ),
        event("message_stop", json!({"type": "message_stop"})),
    ]
    .concat()
}

/// The three replies of the scripted fix.
fn replies() -> Vec<String> {
    use serde_json::json;
    vec![
        stream_of(
            "tool_use",
            json!({"type": "tool_use", "id": "toolu_read", "name": "read_file",
                   "input": {"path": "calc.py"}}),
        ),
        stream_of(
            "tool_use",
            json!({"type": "tool_use", "id": "toolu_edit", "name": "edit_file",
                   "input": {"path": "calc.py", "old_text": "return a - b",
                             "new_text": "return a + b"}}),
        ),
        stream_of(
            "end_turn",
            json!({"type": "text", "text": "add() subtracted; it adds now."}),
        ),
    ]
}

/// Serves the replies in turn and notes when each request came.
struct Replies {
    bodies: Vec<String>,
    asked: Arc<Mutex<Vec<Instant>>>,
}

impl wiremock::Respond for Replies {
    fn respond(&self, _: &wiremock::Request) -> wiremock::ResponseTemplate {
        let mut asked = self.asked.lock().expect("times");
        asked.push(Instant::now());
        let body = self
            .bodies
            .get(asked.len() - 1)
            .cloned()
            .unwrap_or_default();
        wiremock::ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
    }
}

/// The fake API, on loopback, for as long as it lives.
struct FakeApi {
    _runtime: tokio::runtime::Runtime,
    server: wiremock::MockServer,
    asked: Arc<Mutex<Vec<Instant>>>,
}

impl FakeApi {
    fn start() -> FakeApi {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let asked = Arc::new(Mutex::new(Vec::new()));
        let server = runtime.block_on(async {
            let server = wiremock::MockServer::start().await;
            wiremock::Mock::given(wiremock::matchers::method("POST"))
                .and(wiremock::matchers::path("/v1/messages"))
                .respond_with(Replies {
                    bodies: replies(),
                    asked: asked.clone(),
                })
                .mount(&server)
                .await;
            server
        });
        FakeApi {
            _runtime: runtime,
            server,
            asked,
        }
    }

    /// Forgets the requests so far: the next one gets the first reply.
    fn reset(&self) {
        self.asked.lock().expect("times").clear();
    }

    fn asked(&self) -> Vec<Instant> {
        self.asked.lock().expect("times").clone()
    }
}

/// What one whole run took.
struct Sample {
    to_first_request: Duration,
    last_reply_to_exit: Duration,
    wall: Duration,
    harness: Duration,
    peak_kib: i64,
}

/// `agent-git fix` in `clone` against `api`, run from a small launcher that reports its peak.
fn fix(clone: &Path, api: &FakeApi) -> Sample {
    api.reset();
    let out = clone.parent().expect("parent").join("fix.json");
    let mut command = Command::new(env!("CARGO_BIN_EXE_agent-git"));
    command
        .args(["fix", "--model", "anthropic:claude-sonnet-4-5", "--json"])
        .current_dir(clone)
        .env("ANTHROPIC_BASE_URL", api.server.uri())
        .env("ANTHROPIC_API_KEY", "bench-key")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1");
    let started = Instant::now();
    let peak_kib = crate::memory::peak_kib_to(command, &out);
    let ended = Instant::now();
    let asked = api.asked();
    assert_eq!(
        asked.len(),
        3,
        "the run asked the model {} times",
        asked.len()
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("fix's --json")).expect("json");
    assert_eq!(report["outcome"], "passed", "{report}");
    assert!(
        report["tests"]["command"]
            .as_str()
            .is_some_and(|c| c.starts_with(TEST_COMMAND)),
        "the run's tests are not `{TEST_COMMAND}`: {}",
        report["tests"]["command"]
    );
    Sample {
        to_first_request: asked[0] - started,
        last_reply_to_exit: ended - asked[2],
        wall: ended - started,
        harness: Duration::from_secs_f64(report["harness_secs"].as_f64().expect("harness_secs")),
        peak_kib,
    }
}

/// A clone of `repo` in `dir` whose one test fails.
fn failing_clone(repo: &Repo, dir: &Path) -> PathBuf {
    let clone = dir.join("clone");
    let (from, to) = (repo.path.display().to_string(), clone.display().to_string());
    git(dir, &["clone", "-q", &from, &to]);
    common::write(&clone.join("calc.py"), BUG);
    git(&clone, &["commit", "-qam", "add() subtracts"]);
    clone
}

/// One direct run of the test command in `dir`; it fails there or passes, as the tree has it.
fn direct_test(dir: &Path) -> Duration {
    common::time(&mut || {
        let status = Command::new("sh")
            .args(["-c", TEST_COMMAND])
            .current_dir(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("sh runs");
        assert!(status.code().is_some(), "{status:?}");
    })
}

/// F1 and F2 and one direct test run, on a work tree of `clone` of its own.
fn floors(clone: &Path, n: usize) -> (Duration, Duration, Duration) {
    let dir = tempfile::tempdir().expect("temp dir");
    let tree = dir.path().join("wt");
    let spec = tree.display().to_string();
    let add = common::time(&mut || git(clone, &["worktree", "add", "-q", "--detach", &spec]));
    let f1 = add + direct_test(&tree);
    common::write(
        &tree.join("calc.py"),
        &format!("{}# floor {n}\n", common::CALC),
    );
    let test = direct_test(&tree);
    let commit = common::time(&mut || {
        let out = git_command(&tree, &["commit", "-qam", "fix"])
            .output()
            .expect("git commit");
        assert!(out.status.success());
    });
    git(clone, &["worktree", "remove", "--force", &spec]);
    (f1, test + commit, test)
}

fn line(label: &str, samples: &[Duration], floor_label: &str, floor: &[Duration], target: f64) {
    common::side_by_side(label, samples.to_vec(), floor_label, floor.to_vec(), target);
}

/// Writes what is waiting to be written, so that each measure starts on a quiet disk.
fn quiet_disk() {
    // SAFETY: sync takes no arguments and cannot fail.
    unsafe { libc::sync() };
}

/// The spread of some samples: the slowest over the fastest.
fn spread(samples: &[Duration]) -> f64 {
    let max = samples.iter().max().copied().unwrap_or_default();
    let min = samples.iter().min().copied().unwrap_or_default();
    max.as_secs_f64() / min.as_secs_f64().max(1e-9)
}

fn summary(label: &str, samples: &[Sample]) {
    let walls: Vec<Duration> = samples.iter().map(|s| s.wall).collect();
    let harness = Stats::of(samples.iter().map(|s| s.harness).collect());
    let mut peaks: Vec<i64> = samples.iter().map(|s| s.peak_kib).collect();
    peaks.sort();
    println!(
        "  {label:<40} wall {} spread {:.2}x (target 1.5x); harness_secs {}; peak {:.1} MiB",
        Stats::of(walls.clone()).text(),
        spread(&walls),
        harness.text(),
        peaks[peaks.len() / 2] as f64 / 1024.0
    );
}

pub fn section(repo: &Repo, options: &Options) {
    if !common::on_path("python3") {
        println!("  whole run: skipped, no python3 on PATH");
        return;
    }
    let api = FakeApi::start();
    let (mut first, mut second) = (Vec::new(), Vec::new());
    let (mut f1, mut f2, mut tests) = (Vec::new(), Vec::new(), Vec::new());
    // Each sample's clone stays till the end: removing thousands of files keeps the disk
    // busy for seconds after (ext4 with discard), which would slow the next sample.
    let mut clones = Vec::new();
    for n in 0..options.runs {
        let dir = tempfile::tempdir().expect("temp dir");
        let clone = failing_clone(repo, dir.path());
        quiet_disk();
        first.push(fix(&clone, &api));
        quiet_disk();
        let (one, two, test) = floors(&clone, n);
        f1.push(one);
        f2.push(two);
        tests.push(test);
        quiet_disk();
        second.push(fix(&clone, &api));
        clones.push(dir);
    }
    let take = |samples: &[Sample], f: fn(&Sample) -> Duration| -> Vec<Duration> {
        samples.iter().map(f).collect()
    };
    line(
        "first run: start -> first request",
        &take(&first, |s| s.to_first_request),
        "F1 worktree add + test",
        &f1,
        2.0,
    );
    line(
        "first run: last reply -> exit",
        &take(&first, |s| s.last_reply_to_exit),
        "F2 test + git commit",
        &f2,
        2.0,
    );
    // The target is the floor itself: 1.2 × each direct test run + 0.1 s.
    let second_start = take(&second, |s| s.to_first_request);
    let allowed: Vec<Duration> = tests
        .iter()
        .map(|t| t.mul_f64(1.2) + Duration::from_millis(100))
        .collect();
    line(
        "second run: start -> first request",
        &second_start,
        "1.2 x test + 0.1 s",
        &allowed,
        1.0,
    );
    line(
        "second run: last reply -> exit",
        &take(&second, |s| s.last_reply_to_exit),
        "F2 test + git commit",
        &f2,
        2.0,
    );
    summary("first run", &first);
    summary("second run", &second);
    let harness = Stats::of(take(&first, |s| s.harness));
    let verdict = if harness.median <= Duration::from_secs(1) {
        "ok"
    } else {
        "OVER"
    };
    println!(
        "  harness_secs of a first run: median {:.2} s (target 1.0 s at 10,000 files) {verdict}",
        harness.median.as_secs_f64()
    );
}
