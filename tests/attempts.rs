//! Best-of-N: `fix --attempts N` makes N independent runs from one base, lets the tests decide
//! between them, and keeps one summary that `runs`, `show` and `apply` find.

use crate::common::*;
use crate::models::{anthropic_fix_replies, claude_fix, fake_api, run};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A script directory with one file per attempt.
fn scripts_in(env: &TestEnv, name: &str, attempts: &[Value]) -> PathBuf {
    let dir = env.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for (i, replies) in attempts.iter().enumerate() {
        let path = dir.join(format!("{}.json", i + 1));
        std::fs::write(path, serde_json::to_string_pretty(replies).unwrap()).unwrap();
    }
    dir
}

fn scripts(env: &TestEnv, attempts: &[Value]) -> PathBuf {
    scripts_in(env, "attempts", attempts)
}

/// Every attempt's outcome, in attempt order, from a set's `--json`.
fn outcomes(json: &Value) -> Vec<&str> {
    json["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outcome"].as_str().unwrap())
        .collect()
}

/// Replies that run `sleep 60`, then end the turn.
fn sleeper() -> Value {
    json!([
        calls(
            "Wait.",
            vec![tool("s", "run_command", json!({"command": "sleep 60"}))]
        ),
        end_turn("Done.")
    ])
}

/// Attempt 1 breaks multiply and never fixes add; 2 fixes add and writes notes; 3 only
/// fixes add.
fn three_attempts() -> Vec<Value> {
    let wrong = tool(
        "wrong",
        "edit_file",
        json!({"path": "calc.py", "old_text": "return a * b", "new_text": "return a * b + 0"}),
    );
    let notes = tool(
        "notes",
        "write_file",
        json!({"path": "NOTES.md", "content": "add() was fixed.\nIt subtracted.\n"}),
    );
    vec![
        json!([calls("Touch multiply.", vec![wrong]), end_turn("Done.")]),
        json!([
            calls("Fix, with notes.", vec![fix_add(), notes]),
            end_turn("Done.")
        ]),
        json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]),
    ]
}

fn fix_set(env: &TestEnv, repo: &Path, dir: &Path, extra: &[&str]) -> std::process::Output {
    let model = format!("script:{}", dir.display());
    let mut args = vec![
        "fix",
        "Fix the adder",
        "--model",
        &model,
        "--max-turns",
        "2",
    ];
    args.extend_from_slice(extra);
    env.agent(repo, &args)
}

#[test]
fn the_tests_choose_between_attempts_and_the_summary_is_kept_in_the_repository() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let dir = scripts(&env, &three_attempts());
    let before = UserState::capture(&env, &repo);

    let out = fix_set(&env, &repo, &dir, &["--attempts", "3", "--jobs", "2"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        UserState::capture(&env, &repo),
        before,
        "the checkout is untouched"
    );
    let summary = stdout(&out);
    let (err, text) = (stderr(&out), summary.as_str());
    assert!(err.contains("3 attempts from "), "{err}");
    assert!(
        err.contains("agent-git [3/3]: "),
        "each attempt's lines are marked: {err}"
    );
    assert!(
        text.starts_with("agent-git: best of 3 attempts: run "),
        "{text}"
    );
    assert!(
        text.contains("its diff is smaller (2 changed lines against 4 in run"),
        "attempt 3 passed with the smaller diff: {text}"
    );
    let set = text
        .lines()
        .find_map(|l| l.strip_prefix("Agent-Set: "))
        .unwrap()
        .to_string();
    let chosen = text
        .lines()
        .find_map(|l| l.strip_prefix("Agent-Chosen: "))
        .unwrap()
        .to_string();
    assert!(
        text.contains(&format!("Chosen: attempt 3, run {chosen}")),
        "{text}"
    );

    // Each attempt is an ordinary run on its own branch, which says which attempt it was.
    let runs: Value =
        serde_json::from_str(&stdout(&env.agent(&repo, &["runs", "--json"]))).unwrap();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 3, "{runs:?}");
    let mut places: Vec<(u64, String)> = runs
        .iter()
        .map(|r| {
            assert_eq!(r["attempt"]["set"], set.as_str());
            (
                r["attempt"]["index"].as_u64().unwrap(),
                r["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    places.sort();
    for run in runs {
        let run_id = run["run_id"].as_str().unwrap();
        let out = env.agent(&repo, &["transcript", run_id]);
        assert_eq!(
            code(&out),
            0,
            "run {run_id}'s transcript is stored: {}",
            stderr(&out)
        );
    }
    assert_eq!(
        places,
        vec![
            (1, "turn-limit".into()),
            (2, "passed".into()),
            (3, "passed".into())
        ]
    );
    let chosen_branch = runs
        .iter()
        .find(|r| r["run_id"] == chosen.as_str())
        .unwrap()["branch"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        env.trailer(&repo, &chosen_branch, "Agent-Attempt"),
        format!("{set} 3/3")
    );

    // The summary is stored: runs lists the set, show prints it, apply lands the chosen run.
    let listed = stdout(&env.agent(&repo, &["runs"]));
    assert!(
        listed.contains(&format!("{set}  3 attempts  chosen {chosen} (passed)")),
        "{listed}"
    );
    let shown = stdout(&env.agent(&repo, &["show", &set]));
    assert!(
        shown.starts_with("agent-git: best of 3 attempts"),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("{chosen}  passed on {chosen_branch}")),
        "{shown}"
    );
    assert_eq!(
        env.git(
            &repo,
            &[
                "show",
                "-s",
                "--format=%B",
                &format!("refs/agent-git/sets/{set}")
            ]
        )
        .trim_end(),
        summary.trim_end(),
        "the stored summary is the printed one"
    );
    let out = env.agent(&repo, &["apply", &set]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("applied run {chosen}")),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("calc.py")).unwrap(),
        CALC_FIXED
    );
    assert!(
        !repo.join("NOTES.md").exists(),
        "attempt 2's notes are not applied"
    );

    // The others stay ordinary runs that discard removes; discarding the set keeps them.
    let out = env.agent(&repo, &["discard", &set]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("its runs stay"), "{}", stdout(&out));
    assert_eq!(env.git(&repo, &["for-each-ref", "refs/agent-git/sets"]), "");
    assert_eq!(
        env.git(&repo, &["branch", "--list", "agent/*"])
            .lines()
            .count(),
        3
    );
}

#[test]
fn the_set_summary_as_json_names_every_attempt_and_the_choice() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let dir = scripts(&env, &three_attempts()[..2]);
    let out = fix_set(
        &env,
        &repo,
        &dir,
        &["--attempts", "2", "--json", "--branch", "try"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let attempts = json["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["branch"], "try-1");
    assert_eq!(attempts[0]["outcome"], "turn-limit");
    assert_eq!(attempts[0]["failing"], 1);
    assert_eq!(attempts[1]["branch"], "try-2");
    assert_eq!(
        attempts[1]["changed_lines"],
        json!({"added": 3, "removed": 1})
    );
    assert_eq!(
        attempts[1]["report"]["outcome"], "passed",
        "each attempt's own report"
    );
    assert_eq!(json["chosen"]["index"], 2);
    assert_eq!(json["chosen"]["branch"], "try-2");
    assert!(json["chosen"]["why"]
        .as_str()
        .unwrap()
        .starts_with("it passed, and the next best"));

    // Too few scripts for the attempts, and flags that go with one run, are usage errors.
    let out = fix_set(&env, &repo, &dir, &["--attempts", "3"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("holds 2 JSON files for 3 attempts"),
        "{}",
        stderr(&out)
    );
    let out = fix_set(
        &env,
        &repo,
        &dir,
        &["--attempts", "2", "--transcript", "t.json"],
    );
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("--transcript goes with one run"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_cost_and_time_budgets_hold_for_the_whole_set() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    env.git(&repo, &["config", "agent-git.price", "3 15"]);
    // Each reply costs $3: an attempt given less stops after one.
    let pricey = || {
        json!({"stop_reason": "tool_use", "usage": {"input_tokens": 1_000_000},
               "content": [{"type": "tool_use", "id": "l", "name": "list_files", "input": {}}]})
    };
    let dir = scripts(
        &env,
        &[
            json!([pricey(), pricey()]),
            json!([pricey(), pricey()]),
            json!([pricey()]),
        ],
    );
    let out = fix_set(
        &env,
        &repo,
        &dir,
        &["--attempts", "3", "--max-cost", "5", "--json"],
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    // $5 for 3: the first gets $1.67 and spends $3; the second gets $2 and spends $3; nothing
    // is left for the third.
    assert_eq!(
        outcomes(&json),
        vec!["cost-limit", "cost-limit", "not-started"]
    );
    assert_eq!(json["cost_usd"], 6.0);
    assert!(json["attempts"][2]["note"]
        .as_str()
        .unwrap()
        .contains("the set's cost budget of $5.0000 is spent"));

    // The time budget is the set's: an attempt that spends it leaves none for the next.
    let dir = scripts_in(&env, "slow", &[sleeper(), sleeper()]);
    let started = std::time::Instant::now();
    let out = fix_set(
        &env,
        &repo,
        &dir,
        &["--attempts", "2", "--max-time", "4s", "--json"],
    );
    assert!(
        started.elapsed().as_secs() < 25,
        "the sleep was cut by the budget"
    );
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["attempts"][0]["outcome"], "time-limit", "{json}");
    assert_eq!(json["attempts"][1]["outcome"], "not-started");
    assert_eq!(
        json["attempts"][1]["note"],
        "not started: the set's time budget is spent"
    );
}

#[test]
fn ctrl_c_stops_every_attempt_with_its_report_and_the_set_with_its_summary() {
    stopped_by(rustix::process::Signal::INT);
}

/// A closed terminal (SIGHUP) stops the set as Ctrl-C does: no attempt runs on unwatched.
#[test]
fn a_hangup_stops_the_set_as_ctrl_c_does() {
    stopped_by(rustix::process::Signal::HUP);
}

fn stopped_by(signal: rustix::process::Signal) {
    use std::io::BufRead;
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let dir = scripts_in(&env, "slow", &[sleeper(), sleeper(), sleeper()]);
    let model = format!("script:{}", dir.display());
    let mut child = env
        .agent_cmd(
            &repo,
            &[
                "fix",
                "--model",
                &model,
                "--attempts",
                "3",
                "--jobs",
                "2",
                "--json",
            ],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    // Both running attempts are on their branches; their scripts start the command at once.
    let mut started = 0;
    while started < 2 {
        let line = lines.next().unwrap().unwrap();
        if line.contains("]: ") && line.contains("on branch ") {
            started += 1;
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, signal).unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 130, "{}", rest.join("\n"));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        outcomes(&json),
        vec!["interrupted", "interrupted", "not-started"]
    );
    let set = json["set"].as_str().unwrap();
    assert!(
        env.git(
            &repo,
            &["for-each-ref", "--format=%(refname)", "refs/agent-git/sets"]
        )
        .contains(set),
        "the summary is stored"
    );
}

/// The API keys leave agent-git's environment as it starts; each attempt still gets them.
#[tokio::test(flavor = "multi_thread")]
async fn attempts_against_a_real_api_get_the_key() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let replies = [anthropic_fix_replies(), anthropic_fix_replies()].concat();
    let server = fake_api("/v1/messages", replies).await;
    let cmd = claude_fix(
        &env,
        &repo,
        &server,
        "anthropic:claude-sonnet-4-5",
        "agent/key",
        &["--attempts", "2", "--json", "--no-stream"],
    );
    let out = run(cmd).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    for attempt in json["attempts"].as_array().unwrap() {
        assert_eq!(attempt["outcome"], "passed", "{attempt}");
    }
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 4);
    assert!(requests.iter().all(|r| r
        .headers
        .get("x-api-key")
        .is_some_and(|k| k == crate::models::KEY)));
    // Both cost something, and the set counts both.
    let costs: Vec<f64> = json["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["cost_usd"].as_f64().unwrap())
        .collect();
    assert!(costs.iter().all(|c| *c > 0.0), "{costs:?}");
    let total = json["cost_usd"].as_f64().unwrap();
    assert!((total - costs.iter().sum::<f64>()).abs() < 1e-12);
}

/// A run whose tests hang names no failing test; it does not beat one that counts its
/// failures.
#[test]
fn an_attempt_whose_tests_time_out_does_not_win_on_an_unknown_count() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let hang = tool(
        "hang",
        "edit_file",
        json!({"path": "calc.py", "old_text": "def add", "new_text": "while True:\n    pass\n\n\ndef add"}),
    );
    let dir = scripts(
        &env,
        &[
            three_attempts()[0].clone(),
            json!([calls("Hang.", vec![hang]), end_turn("Done.")]),
        ],
    );
    let out = fix_set(
        &env,
        &repo,
        &dir,
        &[
            "--attempts",
            "2",
            "--jobs",
            "2",
            "--test-timeout",
            "3",
            "--json",
        ],
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["attempts"][1]["failing"], Value::Null, "{json}");
    assert_eq!(json["attempts"][0]["failing"], 1);
    assert_eq!(json["chosen"]["index"], 1, "{}", json["chosen"]);
    assert!(json["chosen"]["why"]
        .as_str()
        .unwrap()
        .contains("last test run named none"));
}
