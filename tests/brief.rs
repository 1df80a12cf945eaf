//! What the model is told first: the task, the repository's instructions for agents, the first
//! test result, and what helps it find the bug.

use crate::common::*;
use serde_json::json;

#[test]
fn the_repositorys_agents_md_is_in_the_first_message_and_in_the_printed_prompt() {
    let env = TestEnv::new();
    let agents = "# Notes for agents\n\nNumbers are added with `add`; never edit `vendor/`.\n";
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", TEST_CALC),
            ("AGENTS.md", agents),
            ("CLAUDE.md", "Ignored: AGENTS.md comes first."),
        ],
    );
    let run = env.fix_scripted(
        &repo,
        "agent/told",
        json!([end_turn("Looked.")]),
        &["--max-turns", "1"],
    );
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let first = run.messages()[0]["content"][0]["text"].as_str().unwrap();
    let section = "The repository's instructions for agents (AGENTS.md), from its base commit. \
                   Follow them where they do not conflict with the harness's rules:\n\n\
                   # Notes for agents\n\nNumbers are added with `add`; never edit `vendor/`.\n\n\
                   Before any change, the harness ran the tests.";
    assert!(
        first.starts_with(&format!("Task: Fix the adder\n\n{section}")),
        "{first}"
    );
    assert!(!first.contains("Ignored"), "{first}");

    let printed = stdout(&env.agent(&repo, &["fix", "--print-system-prompt"]));
    assert!(printed.starts_with("You are agent-git"), "{printed}");
    assert!(
        printed.contains("never edit `vendor/`"),
        "the printed prompt shows the instructions: {printed}"
    );

    // CLAUDE.md when there is no AGENTS.md; nothing when there is neither.
    env.git(&repo, &["rm", "-q", "AGENTS.md"]);
    env.git(&repo, &["commit", "-q", "-m", "no AGENTS.md"]);
    let printed = stdout(&env.agent(&repo, &["fix", "--print-system-prompt"]));
    assert!(printed.contains("(CLAUDE.md)"), "{printed}");
    let outside = env.path().join("home");
    let printed = stdout(&env.agent(&outside, &["fix", "--print-system-prompt"]));
    assert!(!printed.contains("instructions for agents"), "{printed}");
}
