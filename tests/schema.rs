//! One JSON shape: every `--json` output, each `--json-events` line and each eval result line
//! validates against docs/schema.json, which documents them.

use crate::common::*;
use serde_json::{json, Value};
use std::path::Path;

/// A validator for the schema's definition `def`.
fn validator(def: &str) -> jsonschema::Validator {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/schema.json");
    let mut schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(
        schema["$defs"][def].is_object(),
        "docs/schema.json defines {def}"
    );
    schema["$ref"] = json!(format!("#/$defs/{def}"));
    jsonschema::validator_for(&schema).unwrap()
}

fn assert_valid(def: &str, value: &Value) {
    let errors: Vec<String> = validator(def)
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{def}: {errors:#?}\n{value:#}");
}

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_str(&stdout(out)).unwrap_or_else(|e| panic!("{e}: {}", stdout(out)))
}

#[test]
fn every_json_output_has_the_documented_shape() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let check = env.agent(&repo, &["check", "--json"]);
    assert_valid("check", &json_of(&check));

    let replies = json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]);
    let run = env.fix_scripted(&repo, "agent/shape", replies.clone(), &["--json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_valid("fix", &json_of(&run.out));
    let stuck = json!([end_turn("Nothing to do."), end_turn("Still nothing.")]);
    let run = env.fix_scripted(&repo, "agent/limit", stuck, &["--json", "--max-turns", "2"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert_valid("fix", &json_of(&run.out));

    let script = env.script("events.json", replies.clone());
    let out = env.fix(&repo, &script, "agent/events", &["--json-events"]);
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 6, "{lines:?}");
    for line in &lines {
        assert_valid("event", line);
    }
    let mut end = lines.last().unwrap().clone();
    end.as_object_mut().unwrap().remove("type");
    assert_valid("fix", &end);

    let dir = env.path().join("attempts");
    std::fs::create_dir(&dir).unwrap();
    for name in ["1.json", "2.json"] {
        std::fs::write(dir.join(name), replies.to_string()).unwrap();
    }
    let model = format!("script:{}", dir.display());
    let set = env.agent(
        &repo,
        &["fix", "--model", &model, "--attempts", "2", "--json"],
    );
    assert_eq!(code(&set), 0, "{}", stderr(&set));
    assert_valid("set", &json_of(&set));

    let runs = env.agent(&repo, &["runs", "--json", "--all"]);
    let runs = json_of(&runs);
    assert!(runs.as_array().unwrap().len() >= 5, "{runs}");
    assert_valid("runs", &runs);
}

#[test]
fn eval_result_lines_have_the_documented_shape() {
    let env = TestEnv::new();
    let task = concat!(env!("CARGO_MANIFEST_DIR"), "/evals/py-paginate-off-by-one");
    let out_file = env.path().join("r.jsonl");
    for extra in [&[][..], &["--attempts", "2"]] {
        let mut args = vec!["eval", task, "--model", "oracle", "--out"];
        args.push(out_file.to_str().unwrap());
        args.extend_from_slice(extra);
        let out = env.agent(Path::new(env.path()), &args);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let text = std::fs::read_to_string(&out_file).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for line in &lines {
        assert_valid("eval_result", line);
    }
    assert_eq!(lines[1]["attempts"]["n"], 2);
}

/// The schema says what it allows: a number given as a string, or a key it does not know,
/// is refused.
#[test]
fn the_schema_refuses_strings_for_numbers_and_unknown_keys() {
    let run = json!([{
        "run_id": "ab12cd34", "branch": "agent/x", "running": false, "outcome": "passed",
        "tests": "2 passed", "turns": "3", "cost_usd": 0.0, "model": "m", "task": "t",
        "base": null, "tip": "0123456789abcdef0123456789abcdef01234567", "time": 0,
        "age_seconds": 0, "applied": null, "attempt": null
    }]);
    assert!(!validator("runs").is_valid(&run), "turns as a string");
    let mut fixed = run.clone();
    fixed[0]["turns"] = json!(3);
    assert!(validator("runs").is_valid(&fixed));
    fixed[0]["cost"] = json!("0.0000 USD");
    assert!(
        !validator("runs").is_valid(&fixed),
        "a key the schema does not know"
    );
}
