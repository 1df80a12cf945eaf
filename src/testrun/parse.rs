//! Failing test names and counts from the output of common test runners. Best effort: when
//! nothing is recognized, the exit code alone decides and the report shows the tail.

use regex::Regex;
use std::sync::OnceLock;

/// A failing test as the output named it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Failure {
    /// The runner's name for it.
    pub name: String,
    /// The first line that says why, when the runner printed one.
    pub detail: Option<String>,
}

/// How many tests a run's output counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Tests that passed.
    pub passed: u32,
    /// Tests that failed or errored.
    pub failed: u32,
    /// Tests skipped.
    pub skipped: u32,
}

/// What the output parsers read from a test run's output.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// The first counts a parser found; None when none did.
    pub counts: Option<Counts>,
    /// The failing tests every parser named, each name once, in order.
    pub failing: Vec<Failure>,
}

struct Patterns {
    pytest_failed: Regex,
    pytest_counts: Regex,
    unittest_failed: Regex,
    unittest_ran: Regex,
    unittest_verdict: Regex,
    cargo_failed: Regex,
    cargo_counts: Regex,
    go_failed: Regex,
    tap_failed: Regex,
    node_spec_failed: Regex,
    node_counts: Regex,
    /// node's dot reporter: one `.` a test that did not fail, one `X` a failure.
    node_dots: Regex,
    number_of: Regex,
}

/// Compiles the patterns now, so that their first use does not wait for them.
pub(super) fn warm_up() {
    let _ = patterns();
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let re = |p: &str| Regex::new(p).unwrap_or_else(|e| panic!("bad built-in regex {p}: {e}"));
        Patterns {
            pytest_failed: re(r"^(?:FAILED|ERROR) ([^\s(]\S*)(?: - (.*))?$"),
            pytest_counts: re(r"\b\d+ (?:passed|failed|errors?|skipped)\b"),
            unittest_failed: re(r"^(?:FAIL|ERROR): ([\w.]+) \(([\w.]+)\)"),
            unittest_ran: re(r"^Ran (\d+) tests? in "),
            unittest_verdict: re(r"^(?:OK|FAILED)(?: \((.*)\))?$"),
            cargo_failed: re(r"^test (\S+) \.\.\. FAILED$"),
            // `\S`, not `\w`: Unicode's word class makes this one pattern 0.9 MiB in memory.
            cargo_counts: re(r"^test result: \S+\. (\d+) passed; (\d+) failed; (\d+) ignored;"),
            go_failed: re(r"^\s*--- FAIL: (\S+)"),
            tap_failed: re(r"^\s*not ok \d+ - (.+?)(?:\s+#.*)?$"),
            node_spec_failed: re(r"^\s*✖ (.+?)(?: \([\d.]+m?s\))?$"),
            node_counts: re(r"^[#ℹ] (pass|fail|skipped|todo) (\d+)$"),
            node_dots: re(r"^[.X]+$"),
            number_of: re(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)\b"),
        }
    })
}

/// The counts of pytest's own summary lines (`3 passed, 1 skipped in 0.12s`, `== 1 failed in
/// 2.0s ==`), summed over every pytest run in the output; None when it printed none. Other
/// tools' counts (`0 errors, 0 warnings`, cargo's `test result:`) are not pytest's.
pub fn pytest_summary(output: &str) -> Option<Counts> {
    let p = patterns();
    let mut total: Option<Counts> = None;
    for line in output.lines() {
        let line = line.trim().trim_matches('=').trim();
        let Some((counted, time)) = line.rsplit_once(" in ") else {
            continue;
        };
        let seconds = time.split_whitespace().next().unwrap_or("");
        let timed = seconds.ends_with('s') && seconds[..seconds.len() - 1].parse::<f64>().is_ok();
        if !timed || !p.pytest_counts.is_match(counted) {
            continue;
        }
        add_pytest_counts(total.get_or_insert_with(Counts::default), counted);
    }
    total
}

/// Adds the counts of one pytest summary line (`2 passed, 1 xfailed, 1 error`) to `sum`.
fn add_pytest_counts(sum: &mut Counts, line: &str) {
    for c in patterns().number_of.captures_iter(line) {
        let n = c[1].parse::<u32>().unwrap_or(0);
        match &c[2] {
            "passed" | "xpassed" => sum.passed += n,
            "skipped" | "xfailed" => sum.skipped += n,
            _ => sum.failed += n,
        }
    }
}

/// Whether `line` is pytest's progress line: one letter per test, then its percentage.
pub fn is_pytest_progress(line: &str) -> bool {
    let (marks, rest) = match line.rsplit_once(" [") {
        Some((marks, rest)) => (marks.trim_end(), Some(rest)),
        None => (line.trim_end(), None),
    };
    !marks.is_empty()
        && marks.chars().all(|c| ".FsxXEu".contains(c))
        && rest.is_none_or(|r| r.trim_start().ends_with("%]"))
}

/// The counts of node's dot reporter (`--test-reporter=dot`): a `.` for each test that did
/// not fail (a skipped one too), an `X` for each failure, on lines of nothing else. Read only
/// for node, where no other output looks like that.
pub fn node_dot_counts(output: &str) -> Option<Counts> {
    let p = patterns();
    let rows: Vec<&str> = output.lines().filter(|l| p.node_dots.is_match(l)).collect();
    (!rows.is_empty()).then(|| {
        let count = |c: char| rows.iter().map(|r| r.matches(c).count() as u32).sum();
        Counts {
            passed: count('.'),
            failed: count('X'),
            skipped: 0,
        }
    })
}

/// Reads counts and failing tests from output of any runner: each parser (cargo, pytest,
/// unittest, go, node) is tried in turn.
pub fn parse_output(output: &str) -> Parsed {
    let lines: Vec<&str> = output.lines().collect();
    let mut parsed = Parsed::default();
    for parser in [
        parse_cargo,
        parse_pytest,
        parse_unittest,
        parse_go,
        parse_node,
    ] {
        let found = parser(&lines);
        if parsed.counts.is_none() {
            parsed.counts = found.counts;
        }
        for failure in found.failing {
            if !parsed.failing.iter().any(|f| f.name == failure.name) {
                parsed.failing.push(failure);
            }
        }
    }
    parsed
}

fn parse_cargo(lines: &[&str]) -> Parsed {
    let p = patterns();
    let mut parsed = Parsed::default();
    for line in lines {
        if let Some(c) = p.cargo_failed.captures(line) {
            let name = c[1].to_string();
            let detail = cargo_panic_message(lines, &name);
            parsed.failing.push(Failure { name, detail });
        }
        if let Some(c) = p.cargo_counts.captures(line) {
            let counts = parsed.counts.get_or_insert(Counts {
                passed: 0,
                failed: 0,
                skipped: 0,
            });
            counts.passed += c[1].parse::<u32>().unwrap_or(0);
            counts.failed += c[2].parse::<u32>().unwrap_or(0);
            counts.skipped += c[3].parse::<u32>().unwrap_or(0);
        }
    }
    parsed
}

/// The panic message in the `---- name stdout ----` block of a failed cargo test.
fn cargo_panic_message(lines: &[&str], name: &str) -> Option<String> {
    let header = format!("---- {name} stdout ----");
    let start = lines.iter().position(|l| l.trim() == header)?;
    let block = lines[start + 1..]
        .iter()
        .take_while(|l| !l.starts_with("---- ") && !l.starts_with("failures:"));
    let mut after_panic = false;
    for line in block {
        if line.contains("panicked at") {
            // Newer toolchains put the message on the next line, older ones after the location.
            if let Some((_, msg)) = line.split_once("', ").filter(|(_, m)| !m.is_empty()) {
                return Some(msg.trim().to_string());
            }
            after_panic = true;
        } else if after_panic && !line.trim().is_empty() {
            return Some(line.trim().to_string());
        }
    }
    None
}

fn parse_pytest(lines: &[&str]) -> Parsed {
    let p = patterns();
    let mut parsed = Parsed::default();
    for line in lines {
        if let Some(c) = p.pytest_failed.captures(line) {
            parsed.failing.push(Failure {
                name: c[1].to_string(),
                detail: c.get(2).map(|m| m.as_str().trim().to_string()),
            });
        }
    }
    let summary = lines.iter().rev().find(|l| {
        p.pytest_counts.is_match(l) && !l.starts_with("test result:") && !l.starts_with("Ran ")
    });
    if let Some(line) = summary {
        let mut counts = Counts::default();
        add_pytest_counts(&mut counts, line);
        parsed.counts = Some(counts);
    }
    parsed
}

fn parse_unittest(lines: &[&str]) -> Parsed {
    let p = patterns();
    let mut parsed = Parsed::default();
    for (i, line) in lines.iter().enumerate() {
        if let Some(c) = p.unittest_failed.captures(line) {
            let (method, id) = (&c[1], &c[2]);
            let name = if id.ends_with(&format!(".{method}")) {
                id.to_string()
            } else {
                format!("{id}.{method}")
            };
            let block: Vec<&&str> = lines[i + 1..]
                .iter()
                .skip_while(|l| l.starts_with("---"))
                .take_while(|l| !l.starts_with("===") && !l.starts_with("---"))
                .collect();
            let detail = block
                .iter()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(|l| l.trim().to_string());
            parsed.failing.push(Failure { name, detail });
        }
    }
    // Every `Ran N tests` with the verdict line after it, summed: `make test` may run several.
    let mut total: Option<Counts> = None;
    let mut ran: Option<u32> = None;
    for line in lines {
        if let Some(c) = p.unittest_ran.captures(line) {
            ran = c[1].parse::<u32>().ok();
        } else if let (Some(n), Some(c)) = (ran, p.unittest_verdict.captures(line)) {
            let (failed, skipped) = unittest_tally(c.get(1).map_or("", |m| m.as_str()));
            let sum = total.get_or_insert_with(Counts::default);
            sum.passed += n.saturating_sub(failed + skipped);
            sum.failed += failed;
            sum.skipped += skipped;
            ran = None;
        }
    }
    parsed.counts = total;
    parsed
}

/// The failures (failures, errors, unexpected successes) and skips in unittest's
/// `FAILED (failures=1, errors=2, skipped=1)` or `OK (skipped=3, expected failures=1)`.
fn unittest_tally(inner: &str) -> (u32, u32) {
    let (mut failed, mut skipped) = (0, 0);
    for (key, value) in inner
        .split(',')
        .filter_map(|part| part.trim().split_once('='))
    {
        let n = value.parse::<u32>().unwrap_or(0);
        match key {
            "failures" | "errors" | "unexpected successes" => failed += n,
            "skipped" => skipped += n,
            _ => {}
        }
    }
    (failed, skipped)
}

fn parse_go(lines: &[&str]) -> Parsed {
    let p = patterns();
    let mut parsed = Parsed::default();
    for (i, line) in lines.iter().enumerate() {
        if let Some(c) = p.go_failed.captures(line) {
            let detail = lines
                .get(i + 1)
                .map(|l| l.trim())
                .filter(|l| !l.is_empty() && !l.starts_with("---") && *l != "FAIL")
                .map(str::to_string);
            parsed.failing.push(Failure {
                name: c[1].to_string(),
                detail,
            });
        }
    }
    parsed
}

fn parse_node(lines: &[&str]) -> Parsed {
    let p = patterns();
    let mut parsed = Parsed::default();
    let (mut pass, mut fail, mut skipped) = (None, None, 0);
    for (i, line) in lines.iter().enumerate() {
        let tap = p.tap_failed.captures(line);
        let failed = tap
            .as_ref()
            .or(p.node_spec_failed.captures(line).as_ref())
            .map(|c| c[1].trim().to_string());
        if let Some(name) = failed {
            if name != "failing tests:" && !parsed.failing.iter().any(|f| f.name == name) {
                let detail = if tap.is_some() {
                    tap_error(&lines[i + 1..])
                } else {
                    None
                };
                parsed.failing.push(Failure { name, detail });
            }
        }
        if let Some(c) = p.node_counts.captures(line) {
            let n = c[2].parse::<u32>().ok();
            match &c[1] {
                "pass" => pass = n,
                "fail" => fail = n,
                _ => skipped += n.unwrap_or(0),
            }
        }
    }
    if let (Some(passed), Some(failed)) = (pass, fail) {
        parsed.counts = Some(Counts {
            passed,
            failed,
            skipped,
        });
    }
    parsed
}

/// The first line of `error:` in the YAML block that follows a TAP `not ok` line.
fn tap_error(after: &[&str]) -> Option<String> {
    let block = after.iter().take_while(|l| l.trim() != "...");
    let mut lines = block.skip_while(|l| !l.trim_start().starts_with("error:"));
    let first = lines
        .next()?
        .trim_start()
        .trim_start_matches("error:")
        .trim();
    let text = if first.starts_with('|') || first.starts_with('>') || first.is_empty() {
        lines.map(|l| l.trim()).find(|l| !l.is_empty())?.to_string()
    } else {
        first.trim_matches('\'').to_string()
    };
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(parsed: &Parsed) -> Vec<&str> {
        parsed.failing.iter().map(|f| f.name.as_str()).collect()
    }

    #[test]
    fn pytests_own_summary_lines_are_told_from_other_tools_counts() {
        let out = "..                                  [100%]\n2 passed, 1 xfailed in 0.03s\n\
            test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n\
            pyright: 0 errors, 0 warnings, 0 informations\n\
            ============ 1 failed, 4 passed in 1.20s (0:00:01) ============\n";
        assert_eq!(
            pytest_summary(out),
            Some(Counts {
                passed: 6,
                failed: 1,
                skipped: 1
            })
        );
        assert_eq!(pytest_summary("pyright: 0 errors, 0 warnings\n"), None);
        assert!(is_pytest_progress("..F.sx                       [ 60%]"));
        assert!(is_pytest_progress("uuu.Xx."));
        assert!(!is_pytest_progress("test_calc.py ..F. [100%]"));
    }

    #[test]
    fn pytest_short_summary() {
        let out = "\
F.                                                                       [100%]
=================================== FAILURES ===================================
___________________________________ test_add ___________________________________
    def test_add():
>       assert add(2, 3) == 5
E       assert -1 == 5
=========================== short test summary info ============================
FAILED test_calc.py::test_add - assert -1 == 5
1 failed, 1 passed in 0.02s
";
        let parsed = parse_output(out);
        assert_eq!(
            parsed.failing,
            vec![Failure {
                name: "test_calc.py::test_add".into(),
                detail: Some("assert -1 == 5".into())
            }]
        );
        assert_eq!(
            parsed.counts,
            Some(Counts {
                passed: 1,
                failed: 1,
                skipped: 0,
            })
        );
    }

    #[test]
    fn builtin_runner_output() {
        let out = "FAILED test_calc.py::test_add - AssertionError: assert add(2, 3) == 5\n\
                   Traceback (most recent call last):\n  ...\nAssertionError\n3 passed, 1 failed\n";
        let parsed = parse_output(out);
        assert_eq!(names(&parsed), vec!["test_calc.py::test_add"]);
        assert_eq!(
            parsed.counts,
            Some(Counts {
                passed: 3,
                failed: 1,
                skipped: 0,
            })
        );
    }

    #[test]
    fn unittest_verbose_failures() {
        let out = "\
.F
======================================================================
FAIL: test_add (test_calc.TestCalc.test_add)
----------------------------------------------------------------------
Traceback (most recent call last):
  File \"test_calc.py\", line 6, in test_add
    self.assertEqual(add(2, 3), 5)
AssertionError: -1 != 5

----------------------------------------------------------------------
Ran 2 tests in 0.001s

FAILED (failures=1)
";
        let parsed = parse_output(out);
        assert_eq!(
            parsed.failing,
            vec![Failure {
                name: "test_calc.TestCalc.test_add".into(),
                detail: Some("AssertionError: -1 != 5".into())
            }]
        );
        assert_eq!(
            parsed.counts,
            Some(Counts {
                passed: 1,
                failed: 1,
                skipped: 0,
            })
        );
    }

    #[test]
    fn cargo_test_failures_sum_over_binaries() {
        let out = "\
running 2 tests
test tests::adds ... FAILED
test tests::zero ... ok

failures:

---- tests::adds stdout ----

thread 'tests::adds' panicked at src/lib.rs:9:9:
assertion `left == right` failed
  left: -1
 right: 5

failures:
    tests::adds

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

test result: ok. 4 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
";
        let parsed = parse_output(out);
        assert_eq!(
            parsed.failing,
            vec![Failure {
                name: "tests::adds".into(),
                detail: Some("assertion `left == right` failed".into())
            }]
        );
        assert_eq!(
            parsed.counts,
            Some(Counts {
                passed: 5,
                failed: 1,
                skipped: 0,
            })
        );
    }

    #[test]
    fn go_test_failures() {
        let out = "--- FAIL: TestAdd (0.00s)\n    calc_test.go:8: got -1, want 5\nFAIL\nFAIL\texample.com/calc\t0.002s\n";
        let parsed = parse_output(out);
        assert_eq!(
            parsed.failing,
            vec![Failure {
                name: "TestAdd".into(),
                detail: Some("calc_test.go:8: got -1, want 5".into())
            }]
        );
        assert_eq!(parsed.counts, None);
    }

    #[test]
    fn node_test_tap_and_spec() {
        let tap = "TAP version 13\n# Subtest: adds\nnot ok 1 - adds\n  ---\n  duration_ms: 4.6\n  error: |-\n    Expected values to be strictly equal:\n\n    2 !== 3\n  ...\nok 2 - zero\n1..2\n# tests 2\n# pass 1\n# fail 1\n";
        let parsed = parse_output(tap);
        assert_eq!(
            parsed.failing,
            vec![Failure {
                name: "adds".into(),
                detail: Some("Expected values to be strictly equal:".into())
            }]
        );
        assert_eq!(
            parsed.counts,
            Some(Counts {
                passed: 1,
                failed: 1,
                skipped: 0,
            })
        );

        let spec = "✖ adds (1.2ms)\n✔ zero (0.1ms)\nℹ tests 2\nℹ pass 1\nℹ fail 1\n\n✖ failing tests:\n\n✖ adds (1.2ms)\n";
        let parsed = parse_output(spec);
        assert_eq!(names(&parsed), vec!["adds"]);
        assert_eq!(
            parsed.counts,
            Some(Counts {
                passed: 1,
                failed: 1,
                skipped: 0,
            })
        );
    }

    #[test]
    fn unknown_output_yields_nothing() {
        assert_eq!(
            parse_output("make: *** [check] Error 2\n"),
            Parsed::default()
        );
    }
}
