//! The pre-push helper in hooks/: a real push to a real (bare) remote.

use crate::common::*;
use serde_json::json;
use std::path::Path;
use std::process::Command;

fn install_hook(repo: &Path) {
    let hook = repo.join(".git/hooks/pre-push");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("hooks/pre-push"),
        &hook,
    )
    .unwrap();
    let mut perms = std::fs::metadata(&hook).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&hook, perms).unwrap();
}

fn push(env: &TestEnv, repo: &Path, script: &Path) -> std::process::Output {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_agent-git")).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    // The hook runs under git with the user's environment: no global config, a model set.
    let mut cmd = Command::new("git");
    cmd.args(["push", "-q", "origin", "main"])
        .current_dir(repo)
        .env_clear()
        .env("PATH", path)
        .env("HOME", env.path().join("home"))
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_SYSTEM", "/dev/null")
        .env("AGENT_GIT_MODEL", format!("script:{}", script.display()))
        .env("AGENT_GIT_HOOK_ARGS", "--max-turns 5");
    cmd.output().unwrap()
}

#[test]
fn a_push_of_failing_tests_is_refused_with_the_agents_branch_and_a_passing_one_goes_through() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let remote = env.path().join("remote.git");
    env.git(
        env.path(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    env.git(
        &repo,
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    install_hook(&repo);
    let script = env.script(
        "r.json",
        json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]),
    );

    let out = push(&env, &repo, &script);
    assert!(!out.status.success(), "the push is refused");
    let said = stderr(&out);
    assert!(said.contains("the tests fail at"), "{said}");
    assert!(
        said.contains("(passed)"),
        "the agent fixed it on its branch: {said}"
    );
    let branch = env.git(
        &repo,
        &["branch", "--list", "agent/*", "--format=%(refname:short)"],
    );
    let branch = branch.trim();
    assert!(
        said.contains("review it with: git log -p") && said.contains(branch),
        "{said}"
    );
    assert_eq!(env.show(&repo, &format!("{branch}:calc.py")), CALC_FIXED);
    assert_eq!(
        env.git(&remote, &["branch", "--list"]),
        "",
        "nothing reached the remote"
    );

    // Take the agent's fix; now the push goes through, and no new branch is made.
    env.git(&repo, &["merge", "-q", "--ff-only", branch]);
    let out = push(&env, &repo, &script);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        env.git(&remote, &["rev-parse", "main"]),
        env.git(&repo, &["rev-parse", "main"])
    );
    let branches = env.git(&repo, &["branch", "--list", "agent/*"]);
    assert_eq!(branches.lines().count(), 1, "{branches}");
}
