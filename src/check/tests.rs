use super::*;
use crate::testrun::TestResult;

const ZERO: &str = "0000000000000000000000000000000000000000";

fn oid(n: u8) -> Oid {
    Oid::from_bytes(&[n; 20]).unwrap()
}

fn checked(ref_name: &str, n: u8, verdict: Verdict) -> Checked {
    Checked {
        ref_name: ref_name.into(),
        commit: oid(n),
        verdict,
    }
}

fn pass() -> Verdict {
    Verdict::Passed {
        summary: "2 passed, 0 failed".into(),
        cached: false,
    }
}

fn fail() -> Verdict {
    Verdict::Failed(Box::new(TestResult::not_run("make test", "boom")))
}

fn unrun() -> Verdict {
    Verdict::CannotRun("no test command".into())
}

fn config(mode: HookMode, strict: bool) -> HookConfig {
    HookConfig {
        mode,
        which: Which::Tips,
        strict,
    }
}

#[test]
fn the_config_has_documented_defaults_and_refuses_unknown_values() {
    assert_eq!(
        HookConfig::parse(None, None, None),
        Ok(config(HookMode::Block, false))
    );
    let all = HookConfig::parse(Some("Fix"), Some("all"), Some(true)).unwrap();
    assert_eq!(
        (all.mode, all.which, all.strict),
        (HookMode::Fix, Which::All, true)
    );
    let err = HookConfig::parse(Some("loud"), None, None).unwrap_err();
    assert!(err.contains("use off, warn, block or fix"), "{err}");
    assert!(HookConfig::parse(None, Some("some"), None).is_err());
}

#[test]
fn the_pre_push_input_is_read_line_by_line_and_deletions_are_known() {
    let input = format!(
        "refs/heads/main {} refs/heads/main {ZERO}\n\n(delete) {ZERO} refs/heads/old {}\n",
        oid(1),
        oid(2)
    );
    let updates = parse_updates(&input).unwrap();
    assert_eq!(
        updates,
        vec![
            RefUpdate {
                local_ref: "refs/heads/main".into(),
                local: oid(1),
                remote_ref: "refs/heads/main".into(),
                remote: Oid::ZERO_SHA1,
            },
            RefUpdate {
                local_ref: "(delete)".into(),
                local: Oid::ZERO_SHA1,
                remote_ref: "refs/heads/old".into(),
                remote: oid(2),
            },
        ]
    );
    assert!(!updates[0].is_deletion() && updates[1].is_deletion());
    assert!(parse_updates("main abc")
        .unwrap_err()
        .contains("pre-push hook"));
}

#[test]
fn only_failed_tests_refuse_a_push_unless_strict() {
    let failing = [checked("refs/heads/main", 1, fail())];
    let unrunnable = [checked("refs/heads/main", 1, unrun())];
    let refused = |allow| Decision { allow, fix: vec![] };
    assert_eq!(
        decide(&config(HookMode::Warn, true), &failing),
        refused(true)
    );
    assert_eq!(
        decide(&config(HookMode::Block, false), &failing),
        refused(false)
    );
    assert_eq!(
        decide(&config(HookMode::Block, false), &unrunnable),
        refused(true)
    );
    assert_eq!(
        decide(&config(HookMode::Block, true), &unrunnable),
        refused(false)
    );
    assert_eq!(
        decide(&config(HookMode::Warn, true), &unrunnable),
        refused(true)
    );
    assert_eq!(
        decide(&config(HookMode::Off, true), &failing),
        refused(true)
    );
    let passing = [checked("refs/heads/main", 1, pass())];
    assert_eq!(
        decide(&config(HookMode::Fix, true), &passing),
        refused(true)
    );
}

#[test]
fn fix_mode_starts_one_run_per_ref_on_its_newest_failing_commit() {
    let pushed = [
        checked("refs/heads/main", 3, pass()),
        checked("refs/heads/main", 2, fail()),
        checked("refs/heads/main", 1, fail()),
        checked("refs/tags/v1", 2, fail()),
        checked("refs/heads/topic", 4, fail()),
    ];
    assert_eq!(
        decide(&config(HookMode::Fix, false), &pushed),
        Decision {
            allow: false,
            fix: vec![oid(2), oid(4)]
        }
    );
}

#[test]
fn a_verdict_reads_as_one_line_per_commit() {
    let mut result = TestResult::not_run("make test", "make: *** [test] Error 1");
    result.ran = true;
    result.exit_code = Some(2);
    let said = describe(&checked(
        "refs/heads/main",
        0xab,
        Verdict::Failed(Box::new(result)),
    ));
    assert_eq!(
        said,
        "agent-git: abababa (main): the tests fail (failed (exit 2)) with `make test`\n  \
         | make: *** [test] Error 1\n"
    );
    let cached = Verdict::Passed {
        summary: "3 passed, 0 failed".into(),
        cached: true,
    };
    assert_eq!(
        describe(&checked("refs/tags/v1", 0xab, cached)),
        "agent-git: abababa (v1): tests pass (3 passed, 0 failed; this tree passed before, \
         nothing ran)\n"
    );
}

/// A repository with a line of commits a <- b <- c on main, and `origin/main` at `a`.
fn line_of_commits(dir: &std::path::Path) -> (Repository, Vec<Oid>) {
    let repo = Repository::init(dir).unwrap();
    let sig = git2::Signature::now("t", "t@example.com").unwrap();
    let mut ids: Vec<Oid> = Vec::new();
    for text in ["a", "b", "c"] {
        let blob = repo.blob(text.as_bytes()).unwrap();
        let mut tree = repo.treebuilder(None).unwrap();
        tree.insert("f", blob, 0o100644).unwrap();
        let tree = repo.find_tree(tree.write().unwrap()).unwrap();
        let parents: Vec<git2::Commit> = ids
            .last()
            .map(|p| repo.find_commit(*p).unwrap())
            .into_iter()
            .collect();
        let parents: Vec<&git2::Commit> = parents.iter().collect();
        ids.push(
            repo.commit(None, &sig, &sig, text, &tree, &parents)
                .unwrap(),
        );
    }
    repo.reference("refs/remotes/origin/main", ids[0], true, "")
        .unwrap();
    (repo, ids)
}

#[test]
fn all_commits_are_those_the_remote_does_not_have_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, ids) = line_of_commits(dir.path());
    let update = RefUpdate {
        local_ref: "refs/heads/main".into(),
        local: ids[2],
        remote_ref: "refs/heads/main".into(),
        remote: Oid::ZERO_SHA1,
    };
    let tips = commits_to_test(&repo, "origin", &update, Which::Tips).unwrap();
    assert_eq!(tips, vec![ids[2]]);
    let all = commits_to_test(&repo, "origin", &update, Which::All).unwrap();
    assert_eq!(all, vec![ids[2], ids[1]]);
    let known = RefUpdate {
        remote: ids[1],
        ..update.clone()
    };
    assert_eq!(
        commits_to_test(&repo, "elsewhere", &known, Which::All).unwrap(),
        vec![ids[2]]
    );
}
