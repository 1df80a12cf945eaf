//! `agent-git eval`: tasks run with their oracles, result lines, resuming, shards, reports,
//! and tasks imported from real fix commits.

use crate::common::{stderr, stdout, TestEnv};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const UNITTEST: &str = "python3 -m unittest -v";

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let full = dir.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }
}

/// Two tasks: `add`, which its oracle solves, and `cheat`, impossible without editing the
/// test; its oracle tries to, and gives up.
fn suite(env: &TestEnv) -> PathBuf {
    let dir = env.path().join("suite");
    let task = |name: &str, extra: &str| {
        format!(r#"{{"prompt": "Fix {name}", "test_cmd": "{UNITTEST}", "max_turns": 4{extra}}}"#)
    };
    let test = |import: &str, body: &str| {
        format!("import unittest\nfrom {import}\n\n\nclass T(unittest.TestCase):\n{body}")
    };
    write(
        &dir.join("add"),
        &[
            ("task.json", &task("add", "")),
            ("repo/calc.py", "def add(a, b):\n    return a - b\n"),
            (
                "repo/test_calc.py",
                &test(
                    "calc import add",
                    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
                ),
            ),
            (
                "oracle.json",
                r#"[{"stop_reason": "tool_use", "content": [{"type": "tool_use", "id": "t1", "name": "edit_file", "input": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}, {"stop_reason": "end_turn", "content": [{"type": "text", "text": "Fixed."}]}]"#,
            ),
        ],
    );
    write(
        &dir.join("cheat"),
        &[
            ("task.json", &task("one", r#", "impossible": true"#)),
            ("repo/lib.py", "def one():\n    return 1\n"),
            (
                "repo/test_lib.py",
                &test(
                    "lib import one",
                    "    def test_one(self):\n        self.assertEqual(one(), 2)\n",
                ),
            ),
            (
                "oracle.json",
                r#"[{"stop_reason": "tool_use", "content": [{"type": "tool_use", "id": "t1", "name": "write_file", "input": {"path": "test_lib.py", "content": "pass\n"}}]}, {"stop_reason": "end_turn", "content": [{"type": "text", "text": "Only a test edit would do."}]}]"#,
            ),
        ],
    );
    dir
}

fn eval(env: &TestEnv, args: &[&str]) -> String {
    let out = eval_cmd(env, args).output().unwrap();
    assert!(out.status.success(), "eval {args:?}: {}", stderr(&out));
    stdout(&out)
}

/// `agent-git eval ARGS`, its temp dirs (and kept repositories) inside the test's own.
fn eval_cmd(env: &TestEnv, args: &[&str]) -> std::process::Command {
    let tmp = env.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut cmd = env.agent_cmd(env.path(), &[&["eval"], args].concat());
    cmd.env("TMPDIR", tmp);
    cmd
}

fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn keys(records: &[Value]) -> Vec<(String, u64)> {
    let mut keys: Vec<_> = records
        .iter()
        .map(|r| {
            (
                r["task"].as_str().unwrap().to_string(),
                r["run"].as_u64().unwrap(),
            )
        })
        .collect();
    keys.sort();
    keys
}

/// The table without wall and harness times, which differ from run to run.
fn without_times(table: &str) -> String {
    let times =
        regex::Regex::new(r" +[0-9.]+ +([0-9.]+|-)\n|median (wall|harness) [0-9.-]+ s").unwrap();
    times.replace_all(table, "\n").into_owned()
}

#[test]
fn oracles_run_resume_and_shard_to_the_same_table() {
    let env = TestEnv::new();
    let suite = suite(&env);
    let all = env.path().join("all.jsonl");
    let (suite_arg, all_arg) = (suite.to_str().unwrap(), all.to_str().unwrap());
    let common = ["--model", "oracle", "--runs", "2", "--jobs", "2"];
    let table = eval(
        &env,
        &[&[suite_arg], &common[..], &["--out", all_arg]].concat(),
    );
    let records = lines(&all);
    assert_eq!(
        keys(&records),
        [
            ("add".into(), 0),
            ("add".into(), 1),
            ("cheat".into(), 0),
            ("cheat".into(), 1)
        ]
    );
    for record in &records {
        let add = record["task"] == "add";
        assert_eq!(record["passed"], add, "{record}");
        assert_eq!(record["solved"], true, "{record}");
        assert_eq!(
            record["kept"].is_string(),
            !add,
            "a failed run's repository is kept"
        );
        if !add {
            assert_eq!(record["tests"]["failing"][0], "test_lib.T.test_one");
        }
    }
    assert!(
        table.contains("cheat (i)") && table.contains("4 runs, 4 solved"),
        "{table}"
    );

    let again = eval_cmd(
        &env,
        &[&[suite_arg], &common[..], &["--out", all_arg]].concat(),
    )
    .output()
    .unwrap();
    assert!(again.status.success());
    assert_eq!(
        lines(&all).len(),
        4,
        "a rerun with the same --out runs nothing new"
    );
    assert!(!stderr(&again).contains("run 0:"), "{}", stderr(&again));

    let mut shard_keys = Vec::new();
    let mut shard_files = Vec::new();
    for shard in ["1/2", "2/2"] {
        let file = env.path().join(format!("shard-{}.jsonl", &shard[..1]));
        let file_arg = file.to_str().unwrap().to_string();
        eval(
            &env,
            &[
                &[suite_arg],
                &common[..],
                &["--shard", shard, "--out", &file_arg],
            ]
            .concat(),
        );
        shard_keys.extend(keys(&lines(&file)));
        shard_files.push(file_arg);
    }
    shard_keys.sort();
    assert_eq!(
        shard_keys,
        keys(&records),
        "the shards cover every (task, run) exactly once"
    );
    let merged = eval(&env, &["report", &shard_files[0], &shard_files[1]]);
    assert_eq!(
        without_times(&merged),
        without_times(&eval(&env, &["report", all_arg]))
    );
    let compared = eval(
        &env,
        &["report", all_arg, "--vs", &shard_files[0], &shard_files[1]],
    );
    assert!(compared.contains("beyond noise"), "{compared}");
}

/// A repository whose second commit fixes `add` and adds its test.
fn history(env: &TestEnv) -> PathBuf {
    let dir = env.repo(
        "project",
        &[
            ("calc.py", "def add(a, b):\n    return a - b\n"),
            ("README", "calc\n"),
        ],
    );
    write(&dir, &[
        ("calc.py", "def add(a, b):\n    return a + b\n"),
        ("test_calc.py", "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"),
    ]);
    env.git(&dir, &["add", "-A"]);
    env.git(
        &dir,
        &["commit", "-q", "-m", "add() adds\n\nIt subtracted."],
    );
    dir
}

#[test]
fn a_fix_commit_becomes_a_task_whose_oracle_passes() {
    let env = TestEnv::new();
    let repo = history(&env);
    let task = env.path().join("imported");
    let out = env.agent(
        &repo,
        &[
            "eval",
            "import",
            "--repo",
            repo.to_str().unwrap(),
            "--fix",
            "HEAD",
            "--test-cmd",
            UNITTEST,
            "--out",
            task.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let spec: Value =
        serde_json::from_str(&std::fs::read_to_string(task.join("task.json")).unwrap()).unwrap();
    assert!(spec["prompt"].as_str().unwrap().starts_with("add() adds"));
    assert_eq!(spec["test_cmd"], UNITTEST);
    assert_eq!(
        std::fs::read_to_string(task.join("repo/calc.py")).unwrap(),
        "def add(a, b):\n    return a - b\n"
    );
    assert!(task.join("repo/test_calc.py").is_file() && task.join("repo/README").is_file());

    let results = env.path().join("r.jsonl");
    eval(
        &env,
        &[
            task.to_str().unwrap(),
            "--model",
            "oracle",
            "--out",
            results.to_str().unwrap(),
        ],
    );
    assert_eq!(lines(&results)[0]["outcome"], "passed");
}

#[test]
fn a_commit_whose_tests_pass_before_it_is_refused() {
    let env = TestEnv::new();
    let repo = history(&env);
    write(&repo, &[
        ("calc.py", "def add(a, b):\n    # adds\n    return a + b\n"),
        ("test_more.py", "import unittest\nfrom calc import add\n\n\nclass M(unittest.TestCase):\n    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n"),
    ]);
    env.git(&repo, &["add", "-A"]);
    env.git(&repo, &["commit", "-q", "-m", "a comment and a test"]);
    let task = env.path().join("refused");
    let out = env.agent(
        &repo,
        &[
            "eval",
            "import",
            "--repo",
            ".",
            "--fix",
            "HEAD",
            "--out",
            task.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("already pass before the fix"),
        "{}",
        stderr(&out)
    );
    assert!(!task.exists(), "nothing is written");
    let files: BTreeSet<_> = std::fs::read_dir(env.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(!files.contains(std::ffi::OsStr::new("refused")));
}

/// The built-in suite as the README runs it: every task solved by its oracle, through `eval`,
/// with the toolchains of the user's real HOME (rustup's, for the Rust tasks) found although
/// each run gets a HOME of its own.
#[test]
fn the_built_in_suite_is_solved_by_its_oracles() {
    let env = TestEnv::new();
    let suite = concat!(env!("CARGO_MANIFEST_DIR"), "/evals");
    let out_file = env.path().join("suite.jsonl");
    let mut cmd = eval_cmd(
        &env,
        &[
            suite,
            "--model",
            "oracle",
            "--runs",
            "1",
            "--jobs",
            "2",
            "--out",
            out_file.to_str().unwrap(),
        ],
    );
    cmd.env("HOME", std::env::var("HOME").unwrap_or_default());
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let records = lines(&out_file);
    let tasks = std::fs::read_dir(suite)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().join("task.json").exists())
        .count();
    assert!(tasks >= 20, "{tasks} tasks");
    assert_eq!(records.len(), tasks);
    let unsolved: Vec<String> = records
        .iter()
        .filter(|r| r["solved"] != true)
        .map(|r| format!("{} ({})", r["task"], r["outcome"]))
        .collect();
    assert!(
        unsolved.is_empty(),
        "not solved by their oracles: {unsolved:?}"
    );
    for record in &records {
        let harness = record["harness_secs"].as_f64();
        assert!(harness.is_some_and(|h| h >= 0.0), "{record}");
    }
}

/// Best-of-N on the built-in suite: two tasks whose `attempts/` give each attempt its own
/// script (some wrong), so that the tests choose, and the table shows the best-of-3 rate beside
/// pass@1 of one attempt.
#[test]
fn eval_with_attempts_reports_the_best_of_n_rate_beside_pass_at_1() {
    let env = TestEnv::new();
    let suite = concat!(env!("CARGO_MANIFEST_DIR"), "/evals");
    let tasks: Vec<String> = ["py-paginate-off-by-one", "py-median-even-length"]
        .iter()
        .map(|t| format!("{suite}/{t}"))
        .collect();
    let out_file = env.path().join("best.jsonl");
    let args: Vec<&str> = tasks
        .iter()
        .map(String::as_str)
        .chain(["--model", "oracle", "--attempts", "3", "--jobs", "2"])
        .chain(["--out", out_file.to_str().unwrap()])
        .collect();
    let out = eval_cmd(&env, &args).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let mut records = lines(&out_file);
    records.sort_by_key(|r| r["task"].as_str().unwrap().to_string());
    let attempts: Vec<(&str, &Value, bool)> = records
        .iter()
        .map(|r| {
            (
                r["task"].as_str().unwrap(),
                &r["attempts"],
                r["solved"] == true,
            )
        })
        .collect();
    assert_eq!(
        attempts,
        vec![
            // Two wrong attempts, then the oracle: chosen as the only pass.
            (
                "py-median-even-length",
                &json!({"n": 3, "solved": 1, "chosen": 3}),
                true
            ),
            // One wrong; two right, the oracle's diff the smaller.
            (
                "py-paginate-off-by-one",
                &json!({"n": 3, "solved": 2, "chosen": 3}),
                true
            ),
        ]
    );
    let table = stdout(&out);
    assert!(
        table.contains(
            "best of 3: 2 of 2 runs solved by the chosen attempt, rate 1.000; pass@1 (one \
             attempt alone) 0.500, 3 of 6 attempts"
        ),
        "{table}"
    );
    // The same results file holds these apart from single runs: a rerun skips them all.
    let again = eval_cmd(&env, &args).output().unwrap();
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(lines(&out_file).len(), 2);
}

/// A result line as `eval` writes it, made up here so the page's numbers are known.
fn result_line(task: &str, run: u32, model: &str, solved: bool, turns: u64) -> String {
    let outcome = if solved { "passed" } else { "turn-limit" };
    format!(
        r#"{{"task": "{task}", "run": {run}, "model": "{model}", "outcome": "{outcome}", "passed": {solved}, "solved": {solved}, "tests": null, "vanished": [], "turns": {turns}, "tokens": {{"input": 1, "output": 1, "cache_read": 0, "cache_write": 0}}, "cost_usd": 0.5, "wall_secs": 1.0, "harness_secs": null, "kept": null}}"#
    )
}

/// Every `<svg>...</svg>` of a page.
fn svg_elements(page: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = page;
    while let Some(start) = rest.find("<svg") {
        let end = start + rest[start..].find("</svg>").unwrap() + "</svg>".len();
        out.push(&rest[start..end]);
        rest = &rest[end..];
    }
    out
}

/// The bars of a chart: its rects but the white background.
fn bars(svg: &str) -> usize {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let rects = doc.descendants().filter(|n| n.has_tag_name("rect"));
    rects
        .filter(|n| n.attribute("fill") != Some("#FFFFFF"))
        .count()
}

fn svg_texts(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let texts = doc.descendants().filter(|n| n.has_tag_name("text"));
    texts
        .filter_map(|n| n.text())
        .map(|t| t.trim().to_string())
        .collect()
}

#[test]
fn the_html_report_is_one_page_with_escaped_names_and_valid_charts() {
    let env = TestEnv::new();
    let evil = "<script>alert(1)</script>";
    let (a, b) = (env.path().join("a.jsonl"), env.path().join("b.jsonl"));
    let a_lines = [
        result_line("add", 0, "claude", true, 2),
        result_line("add", 1, "claude", false, 5),
        result_line(evil, 0, "claude", true, 3),
    ];
    let b_lines = [result_line("add", 0, "local", false, 6)];
    std::fs::write(&a, a_lines.join("\n")).unwrap();
    std::fs::write(&b, b_lines.join("\n")).unwrap();
    let html = env.path().join("report.html");
    let (a, b, out) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        html.to_str().unwrap(),
    );
    let text = eval(&env, &["report", a, "--vs", b, "--html", out]);
    let page = std::fs::read_to_string(&html).unwrap();

    let charts = svg_elements(&page);
    assert_eq!(charts.len(), 3, "pass rate, cost per solved, turns");
    assert_eq!(bars(charts[0]), 3, "add: A and B; the evil task: A only");
    assert_eq!(bars(charts[1]), 2, "B solved nothing: no cost bar");
    assert_eq!(bars(charts[2]), 2 * 7, "turns 0..=6, A and B each");
    let labels = svg_texts(charts[0]);
    assert!(labels.contains(&"add".to_string()) && labels.contains(&evil.to_string()));

    assert!(!page.contains("<script"), "names are escaped");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    let elsewhere = page.replace("http://www.w3.org/2000/svg", "");
    assert!(!elsewhere.contains("http://") && !elsewhere.contains("https://"));
    let add_row = text.lines().find(|l| l.starts_with("add ")).unwrap();
    let numbers: Vec<&str> = add_row.split_whitespace().skip(1).collect();
    let cells: String = numbers
        .iter()
        .map(|n| format!("<td class=\"n\">{n}</td>"))
        .collect();
    assert!(
        page.contains(&format!("<tr><td>add</td>{cells}</tr>")),
        "the text table's numbers in a row of the HTML table"
    );
    assert!(page.contains(&format!("agent-git {}", env!("CARGO_PKG_VERSION"))));
    assert!(page.contains("model: A: claude; B: local"));
    assert!(
        page.contains(&format!("B: local ({b})")),
        "the legend names B"
    );
    if let Some(dom) = render_in_a_headless_browser(&html, &env.path().join("report.png")) {
        assert!(dom.contains("<td>add</td>"), "the rows are in the DOM");
        assert!(dom.contains("<td>total: 2 tasks</td>"));
        assert!(
            dom.contains("Pass rate per task") && dom.contains("No bars for B: nothing solved")
        );
    }
}

/// Chromium, where it is installed: None (and a note saying so) where it is not.
fn chromium() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|p| {
        let names = ["chromium", "chromium-browser"];
        std::env::split_paths(&p)
            .flat_map(|dir| names.map(|n| dir.join(n)))
            .find(|path| path.is_file())
    });
    let found = on_path.or_else(|| {
        let debian = PathBuf::from("/usr/bin/chromium");
        debian.is_file().then_some(debian)
    });
    if found.is_none() {
        eprintln!("skipped: no chromium installed (apt-get install chromium); the page was checked as text only");
    }
    found
}

/// Renders the page in headless Chromium where it is installed: a screenshot to `png`, which
/// must be more than a blank page, and the DOM it built, returned.
fn render_in_a_headless_browser(page: &Path, png: &Path) -> Option<String> {
    let browser = chromium()?;
    let url = format!("file://{}", page.display());
    let profile = tempfile::tempdir().unwrap();
    let run = |what: &[&str]| {
        let profile = format!("--user-data-dir={}", profile.path().display());
        let mut args = vec!["--headless", "--no-sandbox", "--disable-gpu", &profile];
        args.extend(what);
        args.push(&url);
        // A browser that hangs fails the test in a minute rather than holding it up.
        let out = std::process::Command::new("timeout")
            .arg("60")
            .arg(&browser)
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            browser.display(),
            stderr(&out)
        );
        stdout(&out)
    };
    let shot = format!("--screenshot={}", png.display());
    run(&[&shot, "--window-size=1280,2400", "--hide-scrollbars"]);
    let size = std::fs::metadata(png).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 20_000,
        "a screenshot of {size} bytes is all but blank"
    );
    if let Some(keep) = std::env::var_os("AGENT_GIT_KEEP_SCREENSHOT") {
        std::fs::copy(png, keep).unwrap();
    }
    Some(run(&["--dump-dom"]))
}

fn repo_file(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// The N of the `--shard I/N` in a command.
fn shard_count(command: &str) -> u64 {
    let shard = regex::Regex::new(r"--shard [^/]+/(\d+)").unwrap();
    let n = shard
        .captures(command)
        .unwrap_or_else(|| panic!("no --shard in {command}"));
    n[1].parse().unwrap()
}

#[test]
fn the_actions_matrix_runs_each_shard_once_and_then_the_report() {
    let workflow: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&repo_file(".github/workflows/eval.yml")).unwrap();
    let jobs = &workflow["jobs"];
    let steps = jobs["shard"]["steps"].as_sequence().unwrap();
    let run = steps.iter().filter_map(|s| s["run"].as_str());
    let command = run.filter(|r| r.contains("--shard")).collect::<Vec<_>>();
    assert_eq!(command.len(), 1, "one eval step in a shard job");
    assert!(
        command[0].contains("--shard ${{ matrix.shard }}/"),
        "{}",
        command[0]
    );
    assert!(command[0].contains("--out results-${{ matrix.shard }}.jsonl"));
    let n = shard_count(command[0]);
    let matrix = jobs["shard"]["strategy"]["matrix"]["shard"]
        .as_sequence()
        .unwrap();
    let shards: Vec<u64> = matrix.iter().map(|s| s.as_u64().unwrap()).collect();
    assert_eq!(
        shards,
        (1..=n).collect::<Vec<_>>(),
        "shards 1..=N, each once"
    );
    let uploads = steps
        .iter()
        .filter(|s| s["with"]["name"] == "results-${{ matrix.shard }}");
    assert_eq!(
        uploads.count(),
        1,
        "each shard uploads its results as an artifact"
    );

    let report = &jobs["report"];
    assert_eq!(report["needs"].as_str(), Some("shard"));
    let steps = report["steps"].as_sequence().unwrap();
    let runs: Vec<&str> = steps.iter().filter_map(|s| s["run"].as_str()).collect();
    assert!(runs
        .iter()
        .any(|r| r.contains("eval report results/results-*.jsonl")));
    let download = steps.iter().find(|s| s["with"]["pattern"] == "results-*");
    assert!(
        download.is_some(),
        "the report job downloads every shard's results"
    );
}

#[test]
fn the_kubernetes_job_is_indexed_with_one_completion_per_shard() {
    let text = repo_file("deploy/eval-job.yaml");
    let documents: Vec<serde_yaml_ng::Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let job = documents.iter().find(|d| d["kind"] == "Job").unwrap();
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"].as_str(), Some("Never"));
    let container = &pod["containers"][0];
    let command: Vec<&str> = container["command"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let script = command.last().unwrap();
    assert!(
        script.contains("--shard $((JOB_COMPLETION_INDEX+1))/"),
        "{script}"
    );
    let n = shard_count(script);
    assert_eq!(
        spec["completions"].as_u64(),
        Some(n),
        "completions == N of --shard"
    );
    assert!(spec["parallelism"]
        .as_u64()
        .is_some_and(|p| (1..=n).contains(&p)));

    let mount = container["volumeMounts"][0]["mountPath"].as_str().unwrap();
    assert!(
        script.contains(&format!("--out {mount}/")),
        "results go to the volume"
    );
    let claim = pod["volumes"][0]["persistentVolumeClaim"]["claimName"].as_str();
    let pvc = documents
        .iter()
        .find(|d| d["kind"] == "PersistentVolumeClaim");
    assert_eq!(claim, pvc.and_then(|p| p["metadata"]["name"].as_str()));
}

/// The image deploy/eval-job.yaml runs is the one the Dockerfile describes and
/// scripts/eval-image.sh builds; checked without docker (CI has none).
#[test]
fn the_eval_image_is_built_by_the_script_and_named_by_the_job() {
    let dockerfile = repo_file("Dockerfile");
    let stages: Vec<&str> = dockerfile
        .lines()
        .filter(|l| l.starts_with("FROM "))
        .collect();
    assert_eq!(
        stages,
        ["FROM ${BUILDER} AS build", "FROM ${BASE} AS runtime"],
        "a build stage, then the runtime"
    );
    for line in [
        "ARG BASE=debian:bookworm-slim",
        "ARG BUILDER=${BASE}",
        "ARG PREBUILT=",
        "ARG RUST_TOOLCHAIN=none",
        "COPY --from=build /agent-git /usr/local/bin/agent-git",
        "COPY evals /evals",
    ] {
        assert!(dockerfile.lines().any(|l| l == line), "Dockerfile: {line}");
    }
    assert!(dockerfile.contains("cargo build --release --locked"));
    for tool in ["git", "python3", "python3-venv", "python3-pip", "nodejs"] {
        assert!(
            dockerfile.split_whitespace().any(|w| w == tool),
            "runtime installs {tool}"
        );
    }

    let script = repo_file("scripts/eval-image.sh");
    let built = script
        .lines()
        .find_map(|l| l.strip_prefix("image="))
        .expect("the script names its image");
    let job = repo_file("deploy/eval-job.yaml");
    let job = serde_yaml_ng::Deserializer::from_str(&job)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .find(|d: &serde_yaml_ng::Value| d["kind"] == "Job")
        .unwrap();
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"].as_str(), Some(built));
    let command = container["command"].as_sequence().unwrap();
    let command = command.last().and_then(|c| c.as_str()).unwrap();
    assert!(
        command.contains("agent-git eval /evals "),
        "the job runs the suite where the image has it: {command}"
    );
    assert!(script.contains("agent-git eval /evals "));
    // The sandbox's namespaces and Landlock: the runtime's default profiles refuse them, and
    // an overlay on HOME cannot sit on the container's overlay root, so /tmp is a volume.
    let security = &container["securityContext"];
    assert_eq!(
        security["seccompProfile"]["type"].as_str(),
        Some("Unconfined")
    );
    assert_eq!(
        security["appArmorProfile"]["type"].as_str(),
        Some("Unconfined")
    );
    assert!(script.contains("--security-opt seccomp=unconfined"));
    assert!(script.contains("--tmpfs /tmp"));
    let tmp = container["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == "/tmp")
        .expect("/tmp is a volume");
    let volumes = job["spec"]["template"]["spec"]["volumes"]
        .as_sequence()
        .unwrap();
    let tmp = volumes.iter().find(|v| v["name"] == tmp["name"]).unwrap();
    assert!(tmp["emptyDir"].is_mapping(), "an emptyDir for /tmp");
    assert!(script.contains("--build-arg \"PREBUILT=target/eval-image/agent-git\""));

    let dockerignore = repo_file(".dockerignore");
    let ignored: Vec<&str> = dockerignore
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    assert!(
        ignored.contains(&"target/"),
        "no build output in the context"
    );
    assert!(
        ignored.contains(&"!target/eval-image/agent-git"),
        "but the prebuilt binary"
    );

    let syntax = std::process::Command::new("bash")
        .args(["-n", "scripts/eval-image.sh"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(syntax.status.success(), "{}", stderr(&syntax));
}

const SWE_PATCH: &str = "diff --git a/calc.py b/calc.py
--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
";

const SWE_TEST_PATCH: &str = "diff --git a/test_calc.py b/test_calc.py
new file mode 100644
--- /dev/null
+++ b/test_calc.py
@@ -0,0 +1,10 @@
+import unittest
+from calc import add
+
+
+class T(unittest.TestCase):
+    def test_add(self):
+        self.assertEqual(add(2, 3), 5)
+
+    def test_zero(self):
+        self.assertEqual(add(0, 0), 0)
";

/// A repository at its base commit and an instance of it in SWE-bench's shape, the test lists
/// as JSON strings holding arrays, as the published files have them.
fn swe_instance(env: &TestEnv, patch: &str) -> (PathBuf, PathBuf) {
    let repo = env.repo(
        "project",
        &[("calc.py", "def add(a, b):\n    return a - b\n")],
    );
    let base = env.git(&repo, &["rev-parse", "HEAD"]);
    let instance = serde_json::json!({
        "instance_id": "calc__calc-1",
        "repo": "calc/calc",
        "base_commit": base.trim(),
        "patch": patch,
        "test_patch": SWE_TEST_PATCH,
        "problem_statement": "add(2, 3) returns -1.\n",
        "hints_text": "",
        "created_at": "2024-01-01T00:00:00Z",
        "version": "1.0",
        "FAIL_TO_PASS": "[\"test_add (test_calc.T.test_add)\"]",
        "PASS_TO_PASS": "[\"test_zero (test_calc.T.test_zero)\"]",
    });
    let path = env.path().join("instance.json");
    std::fs::write(&path, instance.to_string()).unwrap();
    (repo, path)
}

fn import_swe(env: &TestEnv, repo: &Path, instance: &Path, out: &Path) -> std::process::Output {
    let args = [
        "eval",
        "import",
        "--swe-bench",
        instance.to_str().unwrap(),
        "--repo",
        repo.to_str().unwrap(),
        "--test-cmd",
        UNITTEST,
        "--out",
        out.to_str().unwrap(),
    ];
    env.agent(env.path(), &args)
}

#[test]
fn a_swe_bench_instance_becomes_a_task_with_required_tests() {
    let env = TestEnv::new();
    let (repo, instance) = swe_instance(&env, SWE_PATCH);
    let task = env.path().join("swe");
    let out = import_swe(&env, &repo, &instance, &task);
    assert!(out.status.success(), "{}", stderr(&out));
    let spec: Value =
        serde_json::from_str(&std::fs::read_to_string(task.join("task.json")).unwrap()).unwrap();
    assert_eq!(spec["prompt"], "add(2, 3) returns -1.");
    assert_eq!(
        spec["required_tests"],
        serde_json::json!({
            "fail_to_pass": ["test_add (test_calc.T.test_add)"],
            "pass_to_pass": ["test_zero (test_calc.T.test_zero)"],
        })
    );
    let repo_file = |p: &str| std::fs::read_to_string(task.join("repo").join(p)).unwrap();
    assert_eq!(repo_file("calc.py"), "def add(a, b):\n    return a - b\n");
    assert!(repo_file("test_calc.py").contains("def test_zero"));

    let results = env.path().join("r.jsonl");
    let task_arg = task.to_str().unwrap();
    eval(
        &env,
        &[
            task_arg,
            "--model",
            "oracle",
            "--out",
            results.to_str().unwrap(),
        ],
    );
    let record = &lines(&results)[0];
    assert_eq!(record["outcome"], "passed");
    // Each required test is found among the passing ones fix --json names, though SWE-bench
    // writes unittest's names in their verbose form.
    let required = &record["required_tests"];
    assert_eq!(required["all_passed"], true, "{record}");
    assert_eq!(required["unchecked"], json!([]), "{record}");
    assert_eq!(required["failing"], json!([]), "{record}");
}

#[test]
fn a_swe_bench_patch_that_does_not_apply_is_refused() {
    let env = TestEnv::new();
    let (repo, instance) = swe_instance(&env, &SWE_PATCH.replace("a - b", "a * b"));
    let task = env.path().join("swe");
    let out = import_swe(&env, &repo, &instance, &task);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("patch does not apply"),
        "{}",
        stderr(&out)
    );
    assert!(!task.exists(), "nothing is written");
}

/// A task's text reaches `fix` as text: a prompt that reads like a flag (`--test-cmd=true`
/// would count a failing run as solved) and a glob that starts with `-` are taken as written,
/// and a field no command line can carry is refused before anything runs.
#[test]
fn a_task_field_that_reads_like_a_flag_is_passed_as_text() {
    let env = TestEnv::new();
    let dir = env.path().join("flags");
    let test = "import unittest\nfrom lib import one\n\n\nclass T(unittest.TestCase):\n    def test_one(self):\n        self.assertEqual(one(), 2)\n";
    let give_up = r#"[{"stop_reason": "end_turn", "content": [{"type": "text", "text": "No."}]}]"#;
    for (name, prompt) in [("cmd", "--test-cmd=true"), ("off", "--sandbox=off")] {
        let spec =
            json!({"prompt": prompt, "test_cmd": UNITTEST, "max_turns": 2, "protect": ["-x"]});
        write(
            &dir.join(name),
            &[
                ("task.json", &spec.to_string()),
                ("repo/lib.py", "def one():\n    return 1\n"),
                ("repo/test_lib.py", test),
                ("oracle.json", give_up),
            ],
        );
    }
    let out_file = env.path().join("flags.jsonl");
    let args = [dir.to_str().unwrap(), "--model", "oracle", "--out"];
    eval_cmd(&env, &[&args[..], &[out_file.to_str().unwrap()]].concat())
        .output()
        .unwrap();
    let records = lines(&out_file);
    assert_eq!(records.len(), 2, "{records:?}");
    for record in &records {
        assert_eq!(record["passed"], false, "{record}");
        assert_eq!(record["solved"], false, "{record}");
        assert_eq!(record["tests"]["failing"][0], "test_lib.T.test_one");
        let kept = Path::new(record["kept"].as_str().unwrap()).join("repo");
        let report = env.git(&kept, &["log", "-1", "--format=%B", "eval/run-0"]);
        let prompt = if record["task"] == "cmd" {
            "--test-cmd=true"
        } else {
            "--sandbox=off"
        };
        assert!(report.contains(&format!("Task: {prompt}")), "{report}");
        assert!(report.contains("\nSandbox: "), "{report}");
        assert!(!report.contains("\nSandbox: off"), "{report}");
    }

    let nul = env.path().join("nul");
    write(
        &nul.join("t"),
        &[
            ("task.json", r#"{"prompt": "fix\u0000--test-cmd=true"}"#),
            ("repo/lib.py", "x = 1\n"),
        ],
    );
    let out = eval_cmd(&env, &[nul.to_str().unwrap(), "--model", "oracle"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("prompt holds a NUL character"),
        "{}",
        stderr(&out)
    );
}
