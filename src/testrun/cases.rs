//! Which tests ran and how each one ended, read from a runner's output or from the result files
//! it wrote. Pure functions: the names feed the test inventory (no test may vanish) and the
//! report.

use regex::{Captures, Regex};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

/// How one test ended.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Ran and passed (pytest's XPASS too).
    Passed,
    /// Ran and failed, or errored inside the test.
    Failed,
    /// Skipped by the runner (pytest's XFAIL too).
    Skipped,
    /// A whole file or module could not be collected or imported: its tests are unknown.
    Error,
}

/// One test, named as its runner names it (stable from run to run of the same tests).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Case {
    /// The runner's id for it (`tests/test_calc.py::test_add`, `calc::tests::add`).
    pub name: String,
    /// How it ended in this run.
    pub status: Status,
}

/// The runners whose test names agent-git can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runner {
    /// `pytest`, however it is started.
    Pytest,
    /// `python -m unittest -v` style output.
    Unittest,
    /// agent-git's own Python runner (it writes a JSON results file).
    BuiltinPython,
    /// `cargo test` or `cargo nextest`.
    Cargo,
    /// `go test`.
    Go,
    /// `node --test`.
    Node,
    /// Unknown: every output parser is tried.
    Other,
}

/// The test cases named in `output`, as far as `runner`'s output names them.
pub fn cases_from_output(runner: Runner, output: &str) -> Vec<Case> {
    let text = strip_ansi(output);
    let lines: Vec<&str> = text.lines().collect();
    match runner {
        Runner::Pytest => pytest_cases(&lines),
        Runner::Unittest => unittest_cases(&lines),
        // The built-in runner prints pytest-style lines, or unittest's with --unittest.
        Runner::BuiltinPython => first_wins([unittest_cases(&lines), pytest_cases(&lines)]),
        Runner::Cargo => cargo_cases(&lines),
        Runner::Go => go_cases(&lines),
        Runner::Node => node_cases(&lines),
        Runner::Other => first_wins([
            cargo_cases(&lines),
            pytest_cases(&lines),
            unittest_cases(&lines),
            go_cases(&lines),
            node_cases(&lines),
        ]),
    }
}

/// The test cases of a pytest JUnit XML report (`--junitxml`, `junit_family=xunit1`).
pub fn cases_from_junit(xml: &str) -> Result<Vec<Case>, String> {
    let doc = roxmltree::Document::parse(xml)
        .map_err(|e| format!("the JUnit XML report is not well-formed XML: {e}"))?;
    let cases = doc
        .descendants()
        .filter(|node| node.has_tag_name("testcase"))
        .map(junit_case);
    Ok(same_test_merged(cases))
}

/// The test cases of the built-in Python runner's JSON results file.
pub fn cases_from_results_json(text: &str) -> Result<Vec<Case>, String> {
    let file: ResultsFile = serde_json::from_str(text)
        .map_err(|e| format!("the built-in runner's results file is not the expected JSON: {e}"))?;
    Ok(same_test_merged(file.tests))
}

/// `{"tests": [{"name": "test_calc.py::test_add", "status": "passed"}]}`, written by runner.py.
#[derive(serde::Deserialize)]
struct ResultsFile {
    tests: Vec<Case>,
}

// ---------------------------------------------------------------------------------------------
// Shared helpers

struct Patterns {
    ansi: Regex,
    pytest_verbose: Regex,
    pytest_xdist: Regex,
    pytest_summary: Regex,
    unittest_test: Regex,
    unittest_header: Regex,
    cargo_running: Regex,
    cargo_doc_tests: Regex,
    cargo_test: Regex,
    cargo_doc_line: Regex,
    cargo_binary_hash: Regex,
    go_run: Regex,
    go_result: Regex,
    go_ok: Regex,
    go_fail: Regex,
    go_no_tests: Regex,
    tap_result: Regex,
    spec_line: Regex,
    spec_timed: Regex,
}

/// Compiles the patterns now, so that their first use does not wait for them.
pub(super) fn warm_up() {
    let _ = patterns();
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let re = |p: &str| Regex::new(p).unwrap_or_else(|e| panic!("bad built-in regex {p}: {e}"));
        const PYTEST_WORDS: &str = "PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS";
        Patterns {
            ansi: re(r"\x1b\[[0-9;?]*[A-Za-z]"),
            pytest_verbose: re(&format!(
                r"^(\S+::\S.*?|\S+\.py) ({PYTEST_WORDS})(?: \(.*\))?(?:\s+\[\s*\d+%\])?\s*$"
            )),
            pytest_xdist: re(&format!(
                r"^\[gw\d+\] \[\s*\d+%\] ({PYTEST_WORDS}) (\S.*?)\s*$"
            )),
            pytest_summary: re(&format!(
                r"^({PYTEST_WORDS}) (?:collecting )?([^\s(\[].*?)\s*$"
            )),
            // `method (owner)`, a subtest's ` (i=1)` or ` [msg]`, then ` ... status` if on this line.
            unittest_test: re(concat!(
                r"^(\s*)(?P<method>\w+) \((?P<owner>[\w.]*)\)(?P<sub> [\[(].*?)?",
                r"(?: \.\.\. (?P<status>.*?))?\s*$",
            )),
            unittest_header: re(
                r"^(?P<word>FAIL|ERROR|UNEXPECTED SUCCESS): (?P<method>\w+) \((?P<owner>[\w.]*)\)",
            ),
            cargo_running: re(r"^\s*Running (?:unittests )?([^\s`]\S*)(?: \((\S+)\))?\s*$"),
            cargo_doc_tests: re(r"^\s*Doc-tests \S+\s*$"),
            cargo_test: re(r"^test (?P<name>.+?) \.\.\. ?(?P<status>.*?)\s*$"),
            cargo_doc_line: re(r" \(line (\d+)\)"),
            cargo_binary_hash: re(r"-[0-9a-f]{16}$"),
            go_run: re(r"^=== RUN\s+(\S+)\s*$"),
            go_result: re(r"^\s*--- (PASS|FAIL|SKIP): (\S+)"),
            go_ok: re(r"^ok\s+(\S+)\s+(?:\(cached\)|\d[\d.]*m?s\b|\[no tests to run\])"),
            go_fail: re(r"^FAIL\s+(\S+)(?:\s+(.*?))?\s*$"),
            go_no_tests: re(r"^\?\s+(\S+)\s+\[no test files\]"),
            tap_result: re(r"^(not ok|ok) \d+(?: - (.*))?$"),
            spec_line: re(r"^(\s*)(✔|✖|﹣|▶) (.*?)\s*$"),
            spec_timed: re(r"^(.*) \(\d+(?:\.\d+)?m?s\)(?: # (.*))?$"),
        }
    })
}

fn case(name: impl Into<String>, status: Status) -> Case {
    Case {
        name: name.into(),
        status,
    }
}

fn strip_ansi(text: &str) -> Cow<'_, str> {
    patterns().ansi.replace_all(text, "")
}

/// How bad an outcome is: when one test is reported twice, the worse report stands.
fn severity(status: Status) -> u8 {
    match status {
        Status::Skipped => 0,
        Status::Passed => 1,
        Status::Failed => 2,
        Status::Error => 3,
    }
}

/// One case per name, in the order first seen, for runners whose repeated name is the same
/// test reported again (pytest's `-v` line and its summary line, a unittest subtest).
fn same_test_merged(cases: impl IntoIterator<Item = Case>) -> Vec<Case> {
    let mut merged: Vec<Case> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for c in cases {
        match index.get(&c.name) {
            Some(&i) if severity(c.status) > severity(merged[i].status) => {
                merged[i].status = c.status
            }
            Some(_) => {}
            None => {
                index.insert(c.name.clone(), merged.len());
                merged.push(c);
            }
        }
    }
    merged
}

/// Unique names for runners whose repeated name is another test (two doc tests on one item):
/// by `order` within a name (output order on ties), the second becomes `name #2`.
fn numbered(cases: Vec<(Case, u64)>) -> Vec<Case> {
    let mut rank = vec![0usize; cases.len()];
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, (c, _)) in cases.iter().enumerate() {
        by_name.entry(c.name.as_str()).or_default().push(i);
    }
    for indices in by_name.values_mut() {
        indices.sort_by_key(|&i| cases[i].1);
        for (r, &i) in indices.iter().enumerate() {
            rank[i] = r;
        }
    }
    cases
        .into_iter()
        .zip(rank)
        .map(|((mut c, _), r)| {
            if r > 0 {
                c.name = format!("{} #{}", c.name, r + 1);
            }
            c
        })
        .collect()
}

/// Several parsers' findings in one list: the first parser to name a test decides it.
fn first_wins<const N: usize>(lists: [Vec<Case>; N]) -> Vec<Case> {
    let mut seen = HashSet::new();
    lists
        .into_iter()
        .flatten()
        .filter(|c| seen.insert(c.name.clone()))
        .collect()
}

fn in_order(cases: Vec<Case>) -> Vec<(Case, u64)> {
    cases.into_iter().map(|c| (c, 0)).collect()
}

// ---------------------------------------------------------------------------------------------
// pytest (and the built-in runner's default mode, which prints the same lines)

fn pytest_cases(lines: &[&str]) -> Vec<Case> {
    same_test_merged(
        lines
            .iter()
            .filter_map(|line| pytest_verbose_line(line).or_else(|| pytest_summary_line(line))),
    )
}

fn pytest_status(word: &str) -> Option<Status> {
    match word {
        "PASSED" | "XPASS" => Some(Status::Passed),
        "FAILED" | "ERROR" => Some(Status::Failed),
        "SKIPPED" | "XFAIL" => Some(Status::Skipped),
        _ => None,
    }
}

/// `path::name PASSED [ 50%]` (`-v`), or `[gw0] [ 50%] PASSED path::name` (xdist).
fn pytest_verbose_line(line: &str) -> Option<Case> {
    let p = patterns();
    let (id, word) = match p.pytest_verbose.captures(line) {
        Some(c) => (c.get(1)?.as_str(), c.get(2)?.as_str()),
        None => {
            let c = p.pytest_xdist.captures(line)?;
            (c.get(2)?.as_str(), c.get(1)?.as_str())
        }
    };
    pytest_case(id, word)
}

/// `FAILED path::name - message` (`-rA` summary); `ERROR path` alone is a collection error.
fn pytest_summary_line(line: &str) -> Option<Case> {
    let c = patterns().pytest_summary.captures(line)?;
    pytest_case(node_id(c.get(2)?.as_str()), c.get(1)?.as_str())
}

fn pytest_case(id: &str, word: &str) -> Option<Case> {
    let status = match pytest_status(word)? {
        Status::Failed if word == "ERROR" && !id.contains("::") => Status::Error,
        status => status,
    };
    Some(case(id, status))
}

/// The node id at the start of `rest`, before ` - message`; a parameter id may hold spaces.
fn node_id(rest: &str) -> &str {
    let token = rest.split(' ').next().unwrap_or(rest);
    if !token.contains('[') || token.ends_with(']') {
        return token;
    }
    match rest.find("] - ") {
        Some(i) => &rest[..=i],
        None => rest,
    }
}

// ---------------------------------------------------------------------------------------------
// pytest JUnit XML

fn junit_case(node: roxmltree::Node) -> Case {
    let classname = node.attribute("classname").unwrap_or("");
    let name = node.attribute("name").unwrap_or("");
    let child = |tag: &str| node.children().find(|n| n.has_tag_name(tag));
    let file = node
        .attribute("file")
        .map(str::to_string)
        .unwrap_or_else(|| {
            module_file(if classname.is_empty() {
                name
            } else {
                classname
            })
        });
    let error = child("error").map(|n| n.attribute("message").unwrap_or(""));
    let collection_error = error.is_some_and(|message| {
        classname.is_empty() || name == module_of(&file) || message == "collection failure"
    });
    if collection_error {
        return case(file, Status::Error);
    }
    if classname.is_empty() && child("skipped").is_some() {
        // A whole module skipped as it was imported (`allow_module_level=True`).
        return case(file, Status::Skipped);
    }
    let status = if error.is_some() || child("failure").is_some() {
        Status::Failed
    } else if child("skipped").is_some() {
        Status::Skipped // an xfail too: pytest reports it as skipped, type pytest.xfail
    } else {
        Status::Passed
    };
    case(junit_node_id(&file, classname, name), status)
}

/// pytest's node id from xunit1 attributes: `file::Class::name`, the classes being what the
/// classname holds after the file's module path.
fn junit_node_id(file: &str, classname: &str, name: &str) -> String {
    let module = module_of(file);
    let (file, classes) = match classname.strip_prefix(module.as_str()) {
        Some(rest) if rest.is_empty() || rest.starts_with('.') => (file.to_string(), rest),
        // `file` is where an inherited test is defined; the classname names the test's module.
        _ => {
            let split: usize = classname
                .split('.')
                .take_while(|part| !part.starts_with(char::is_uppercase))
                .map(|part| part.len() + 1)
                .sum();
            let module = classname
                .get(..split.saturating_sub(1))
                .unwrap_or(classname);
            (module_file(module), classname.get(split..).unwrap_or(""))
        }
    };
    let mut parts = vec![file];
    parts.extend(
        classes
            .split('.')
            .filter(|p| !p.is_empty())
            .map(str::to_string),
    );
    parts.push(name.to_string());
    parts.join("::")
}

/// `tests/test_calc.py` -> `tests.test_calc`, as pytest writes it in classnames.
pub(super) fn module_of(file: &str) -> String {
    file.trim_end_matches(".py").replace(['/', '\\'], ".")
}

/// `tests.test_calc` -> `tests/test_calc.py`, for a report without `file` attributes.
fn module_file(module: &str) -> String {
    format!("{}.py", module.replace('.', "/"))
}

// ---------------------------------------------------------------------------------------------
// unittest -v

/// unittest's fixtures, which it reports as tests when they fail.
const UNITTEST_FIXTURES: [&str; 4] = [
    "setUpClass",
    "tearDownClass",
    "setUpModule",
    "tearDownModule",
];
const FAILED_IMPORT: &str = "unittest.loader._FailedTest.";

fn unittest_cases(lines: &[&str]) -> Vec<Case> {
    let p = patterns();
    let mut found = Vec::new();
    // A test whose status comes on a later line (its own output came first).
    let mut pending: Option<(String, String)> = None;
    // The two-line form: the test's docstring and its status come on the next line.
    let mut described: Option<(String, String)> = None;
    for line in lines {
        if let Some((id, method)) = described.take() {
            if let Some((_, word)) = line.rsplit_once(" ... ") {
                settle_unittest(&mut found, &mut pending, id, method, word.trim());
                continue;
            }
        }
        if let Some(c) = p.unittest_header.captures(line) {
            let (id, method) = unittest_id(&c);
            let word = if &c["word"] == "ERROR" {
                "ERROR"
            } else {
                "FAIL"
            };
            found.extend(unittest_case(&id, &method, word));
        } else if let Some(c) = p.unittest_test.captures(line) {
            let (id, method) = unittest_id(&c);
            if pending
                .as_ref()
                .is_some_and(|(pending_id, _)| *pending_id != id)
            {
                fail_pending(&mut found, &mut pending);
            }
            match c.name("status") {
                Some(word) => settle_unittest(&mut found, &mut pending, id, method, word.as_str()),
                None => described = Some((id, method)),
            }
        } else if let Some((id, method)) = pending.take() {
            match unittest_case(&id, &method, line.trim()) {
                Some(c) => found.push(c),
                None => pending = Some((id, method)),
            }
        }
    }
    fail_pending(&mut found, &mut pending);
    same_test_merged(found)
}

/// The status `word` of test `id`, or, when the word is the test's own output, a wait for it.
fn settle_unittest(
    found: &mut Vec<Case>,
    pending: &mut Option<(String, String)>,
    id: String,
    method: String,
    word: &str,
) {
    match unittest_case(&id, &method, word) {
        Some(c) => {
            found.push(c);
            *pending = None;
        }
        None => *pending = Some((id, method)),
    }
}

/// A test that started and never said how it ended did not pass.
fn fail_pending(found: &mut Vec<Case>, pending: &mut Option<(String, String)>) {
    if let Some((id, method)) = pending.take() {
        found.extend(unittest_case(&id, &method, "FAIL"));
    }
}

/// (test id, method) from `method (owner)`: 3.11+ prints the whole id as owner, older ones the
/// class, and doctests the docstring's module.
fn unittest_id(c: &Captures) -> (String, String) {
    let method = c.name("method").map_or("", |m| m.as_str());
    let owner = c.name("owner").map_or("", |m| m.as_str());
    let id = if owner.is_empty() {
        method.to_string()
    } else if owner.ends_with(&format!(".{method}")) {
        owner.to_string()
    } else {
        format!("{owner}.{method}")
    };
    (id, method.to_string())
}

fn unittest_case(id: &str, method: &str, word: &str) -> Option<Case> {
    let status = match word {
        "ok" => Status::Passed,
        "FAIL" | "ERROR" | "unexpected success" => Status::Failed,
        "expected failure" => Status::Skipped,
        _ if word.starts_with("skipped") => Status::Skipped,
        _ => return None,
    };
    // A module that failed to import is named by the module; a failed fixture is an error too.
    if let Some(module) = id.strip_prefix(FAILED_IMPORT) {
        return Some(case(module, Status::Error));
    }
    if status == Status::Failed && UNITTEST_FIXTURES.contains(&method) {
        return Some(case(id, Status::Error));
    }
    Some(case(id, status))
}

// ---------------------------------------------------------------------------------------------
// cargo test

/// Which test binary's lines are being read.
enum CargoTarget {
    None,
    Unit(String),
    Doc,
}

fn cargo_cases(lines: &[&str]) -> Vec<Case> {
    let p = patterns();
    let mut labels = cargo_target_labels(lines).into_iter();
    let mut target = CargoTarget::None;
    let mut found: Vec<(Case, u64)> = Vec::new();
    let mut pending: Option<(String, u64)> = None;
    for line in lines {
        if p.cargo_running.is_match(line) {
            fail_cargo_pending(&mut found, &mut pending);
            target = CargoTarget::Unit(labels.next().unwrap_or_default());
        } else if p.cargo_doc_tests.is_match(line) {
            fail_cargo_pending(&mut found, &mut pending);
            target = CargoTarget::Doc;
        } else if let Some(c) = p.cargo_test.captures(line) {
            fail_cargo_pending(&mut found, &mut pending);
            let (name, order) = cargo_name(&target, &c["name"]);
            match cargo_status(&c["status"]) {
                Some(status) => found.push((case(name, status), order)),
                None => pending = Some((name, order)),
            }
        } else if let Some((name, order)) = pending.take() {
            match cargo_status(line.trim()) {
                Some(status) => found.push((case(name, status), order)),
                None => pending = Some((name, order)),
            }
        }
    }
    fail_cargo_pending(&mut found, &mut pending);
    numbered(found)
}

/// A test whose binary died before it said how it ended did not pass.
fn fail_cargo_pending(found: &mut Vec<(Case, u64)>, pending: &mut Option<(String, u64)>) {
    if let Some((name, order)) = pending.take() {
        found.push((case(name, Status::Failed), order));
    }
}

fn cargo_status(word: &str) -> Option<Status> {
    match word {
        "ok" => Some(Status::Passed),
        "FAILED" => Some(Status::Failed),
        _ if word.starts_with("ignored") => Some(Status::Skipped),
        _ if word.starts_with("bench:") => Some(Status::Passed),
        _ => None,
    }
}

/// Each `Running` line's label: its source path (`src/lib.rs`), with the crate added where
/// workspace members share a path (cargo prints unit test paths relative to each member).
fn cargo_target_labels(lines: &[&str]) -> Vec<String> {
    let p = patterns();
    let targets: Vec<(String, String)> = lines
        .iter()
        .filter_map(|line| p.cargo_running.captures(line))
        .map(|c| {
            let path = &c[1];
            let binary = c.get(2).map_or(path, |m| m.as_str());
            // Old cargo named only the binary: its crate is the label.
            let label = if path.contains("/deps/") {
                binary_crate(path)
            } else {
                path.to_string()
            };
            (label, binary_crate(binary))
        })
        .collect();
    let mut crates: HashMap<&str, HashSet<&str>> = HashMap::new();
    for (label, krate) in &targets {
        crates.entry(label).or_default().insert(krate);
    }
    targets
        .iter()
        .map(|(label, krate)| match crates.get(label.as_str()) {
            Some(shared) if shared.len() > 1 => format!("{label} ({krate})"),
            _ => label.clone(),
        })
        .collect()
}

/// `calc` from `target/debug/deps/calc-c6626fb655a8d231`.
fn binary_crate(binary: &str) -> String {
    let file = binary.rsplit('/').next().unwrap_or(binary);
    patterns().cargo_binary_hash.replace(file, "").into_owned()
}

/// The qualified name and, for doc tests, the line number that orders two tests on one item.
fn cargo_name(target: &CargoTarget, raw: &str) -> (String, u64) {
    let name = raw.trim_end_matches(" - should panic");
    match target {
        CargoTarget::None => (name.to_string(), 0),
        CargoTarget::Unit(label) => (format!("{label}::{name}"), 0),
        CargoTarget::Doc => {
            // Line numbers move whenever code above the example changes.
            let p = patterns();
            let line = p
                .cargo_doc_line
                .captures(name)
                .and_then(|c| c[1].parse::<u64>().ok())
                .unwrap_or(0);
            (format!("doc {}", p.cargo_doc_line.replace(name, "")), line)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// go test (-v or not)

fn go_cases(lines: &[&str]) -> Vec<Case> {
    let p = patterns();
    let mut found = Vec::new();
    // The current package's tests, named when its `ok`/`FAIL` line comes.
    let mut package: Vec<(String, Option<Status>)> = Vec::new();
    for line in lines {
        if let Some(c) = p.go_run.captures(line) {
            let name = &c[1];
            if !package.iter().any(|(n, s)| n == name && s.is_none()) {
                package.push((name.to_string(), None));
            }
        } else if let Some(c) = p.go_result.captures(line) {
            let status = match &c[1] {
                "PASS" => Status::Passed,
                "FAIL" => Status::Failed,
                _ => Status::Skipped,
            };
            let name = &c[2];
            match package.iter_mut().find(|(n, s)| n == name && s.is_none()) {
                Some(entry) => entry.1 = Some(status),
                None => package.push((name.to_string(), Some(status))),
            }
        } else if let Some(c) = p
            .go_ok
            .captures(line)
            .or_else(|| p.go_no_tests.captures(line))
        {
            found.extend(go_package(&mut package, Some(&c[1])));
        } else if let Some(c) = p.go_fail.captures(line) {
            found.extend(go_package(&mut package, Some(&c[1])));
            let note = c.get(2).map_or("", |m| m.as_str());
            if note.contains("build failed") || note.contains("setup failed") {
                found.push(case(&c[1], Status::Error));
            }
        }
    }
    found.extend(go_package(&mut package, None));
    numbered(in_order(found))
}

/// The package's tests qualified by its import path; one that never ended did not pass.
fn go_package(package: &mut Vec<(String, Option<Status>)>, path: Option<&str>) -> Vec<Case> {
    package
        .drain(..)
        .map(|(name, status)| {
            let name = path.map_or(name.clone(), |path| format!("{path}.{name}"));
            case(name, status.unwrap_or(Status::Failed))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// node --test: TAP (Node 20's reporter when stdout is not a terminal) and spec

fn node_cases(lines: &[&str]) -> Vec<Case> {
    first_wins([node_tap_cases(lines), node_spec_cases(lines)])
}

/// A test or suite whose results are still to come, by indentation.
struct Open {
    indent: usize,
    name: String,
    has_children: bool,
}

fn node_tap_cases(lines: &[&str]) -> Vec<Case> {
    let p = patterns();
    let mut open: Vec<Open> = Vec::new();
    let mut found = Vec::new();
    let mut yaml_at: Option<usize> = None;
    for line in lines {
        let text = line.trim_start();
        let indent = line.len() - text.len();
        if let Some(at) = yaml_at {
            // The YAML block after a result holds error text that could look like a result.
            if text == "..." && indent == at {
                yaml_at = None;
            }
            continue;
        }
        if text == "---" {
            yaml_at = Some(indent);
        } else if let Some(name) = text.strip_prefix("# Subtest: ") {
            open.push(Open {
                indent,
                name: tap_unescape(name),
                has_children: false,
            });
        } else if let Some(c) = p.tap_result.captures(text) {
            let (name, directive) = tap_directive(c.get(2).map_or("", |m| m.as_str()));
            let status = node_status(&c[1] == "not ok", directive);
            found.extend(close_node(&mut open, indent, &tap_unescape(name), status));
        }
    }
    numbered(in_order(found))
}

/// Ends the test `name` found at `indent`: a leaf is a case, a test with subtests only groups.
fn close_node(open: &mut Vec<Open>, indent: usize, name: &str, status: Status) -> Option<Case> {
    while open.last().is_some_and(|o| o.indent > indent) {
        open.pop();
    }
    let had_children = match open.last() {
        Some(o) if o.indent == indent => open.pop().is_some_and(|o| o.has_children),
        _ => false,
    };
    if let Some(parent) = open.last_mut() {
        parent.has_children = true;
    }
    if had_children {
        return None;
    }
    let top_level = open.is_empty();
    let path: Vec<&str> = open.iter().map(|o| o.name.as_str()).chain([name]).collect();
    Some(node_case(path.join(" > "), top_level, status))
}

/// A test file that failed to load is reported as a failed test named by its path.
fn node_case(name: String, top_level: bool, status: Status) -> Case {
    const SCRIPTS: [&str; 6] = [".js", ".mjs", ".cjs", ".ts", ".mts", ".cts"];
    let file = top_level && SCRIPTS.iter().any(|ext| name.ends_with(ext));
    let status = if file && status == Status::Failed {
        Status::Error
    } else {
        status
    };
    case(name, status)
}

fn node_status(failed: bool, directive: Option<&str>) -> Status {
    let upper = directive.map(str::to_ascii_uppercase);
    match upper.as_deref() {
        Some(d) if d.starts_with("SKIP") || d.starts_with("TODO") => Status::Skipped,
        _ if failed => Status::Failed,
        _ => Status::Passed,
    }
}

/// (name, directive) of `name # SKIP why`; a `#` in a TAP name is escaped as `\#`.
fn tap_directive(text: &str) -> (&str, Option<&str>) {
    match text.split_once(" # ") {
        Some((name, directive)) => (name, Some(directive)),
        None => (text, None),
    }
}

fn tap_unescape(name: &str) -> String {
    name.replace("\\#", "#").replace("\\\\", "\\")
}

fn node_spec_cases(lines: &[&str]) -> Vec<Case> {
    let p = patterns();
    let mut open: Vec<Open> = Vec::new();
    let mut found = Vec::new();
    for line in lines {
        if line.trim_end() == "✖ failing tests:" {
            break; // the recap repeats the failures already read
        }
        let Some(c) = p.spec_line.captures(line) else {
            continue;
        };
        let (indent, marker, text) = (c[1].len(), &c[2], &c[3]);
        let Some(timed) = p.spec_timed.captures(text) else {
            if marker == "▶" {
                open.push(Open {
                    indent,
                    name: text.to_string(),
                    has_children: false,
                });
            }
            continue;
        };
        let name = &timed[1];
        let directive = timed.get(2).map(|m| m.as_str());
        let closes = open
            .last()
            .is_some_and(|o| o.indent == indent && o.name == name);
        if marker == "▶" && !closes {
            continue; // an empty suite
        }
        let status = match marker {
            "﹣" => Status::Skipped,
            _ => node_status(marker == "✖", directive),
        };
        found.extend(close_node(&mut open, indent, name, status));
    }
    numbered(in_order(found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::process::Command;

    fn passed(name: &str) -> Case {
        case(name, Status::Passed)
    }
    fn failed(name: &str) -> Case {
        case(name, Status::Failed)
    }
    fn skipped(name: &str) -> Case {
        case(name, Status::Skipped)
    }
    fn error(name: &str) -> Case {
        case(name, Status::Error)
    }

    // pytest 9.2 `-v -rA --continue-on-collection-errors`, trimmed.
    const PYTEST_VERBOSE: &str = r"collecting ... collected 7 items / 1 error

tests/test_calc.py::TestCalc::test_add[1-2] PASSED                       [ 14%]
tests/test_calc.py::TestCalc::test_add[2-2] FAILED                       [ 28%]
tests/test_calc.py::TestCalc::test_sub PASSED                            [ 42%]
tests/test_calc.py::test_skip SKIPPED (not today)                        [ 57%]
tests/test_calc.py::test_xfail XFAIL (known)                             [ 71%]
tests/test_calc.py::test_xpass XPASS (known)                             [ 85%]
tests/test_calc.py::test_fixture_error ERROR                             [100%]

==================================== ERRORS ====================================
____________________ ERROR collecting tests/test_broken.py _____________________
E   ModuleNotFoundError: No module named 'nonexistent_module'
_____________________ ERROR at setup of test_fixture_error _____________________
E       RuntimeError: fixture boom
=================================== FAILURES ===================================
____________________________ TestCalc.test_add[2-2] ____________________________
E       assert 4 == 3
=========================== short test summary info ============================
PASSED tests/test_calc.py::TestCalc::test_add[1-2]
PASSED tests/test_calc.py::TestCalc::test_sub
SKIPPED [1] tests/test_calc.py:15: not today
XFAIL tests/test_calc.py::test_xfail - known
XPASS tests/test_calc.py::test_xpass - known
ERROR tests/test_broken.py
ERROR tests/test_calc.py::test_fixture_error - RuntimeError: fixture boom
FAILED tests/test_calc.py::TestCalc::test_add[2-2] - assert 4 == 3
==== 1 failed, 2 passed, 1 skipped, 1 xfailed, 1 xpassed, 2 errors in 0.04s ====
";

    #[test]
    fn pytest_verbose_and_summary_lines_name_each_test_once() {
        assert_eq!(
            cases_from_output(Runner::Pytest, PYTEST_VERBOSE),
            vec![
                passed("tests/test_calc.py::TestCalc::test_add[1-2]"),
                failed("tests/test_calc.py::TestCalc::test_add[2-2]"),
                passed("tests/test_calc.py::TestCalc::test_sub"),
                skipped("tests/test_calc.py::test_skip"),
                skipped("tests/test_calc.py::test_xfail"),
                passed("tests/test_calc.py::test_xpass"),
                failed("tests/test_calc.py::test_fixture_error"),
                error("tests/test_broken.py"),
            ]
        );
    }

    #[test]
    fn pytest_summary_alone_keeps_parameter_ids_with_spaces_and_dashes() {
        // pytest 9.2 `-q -rA`, trimmed.
        let out = r"=========================== short test summary info ============================
PASSED test_p.py::test_words[a b]
FAILED test_p.py::test_words[x - y] - AssertionError: assert 'x - y' == 'a b'
1 failed, 1 passed in 0.03s
";
        assert_eq!(
            cases_from_output(Runner::Pytest, out),
            vec![
                passed("test_p.py::test_words[a b]"),
                failed("test_p.py::test_words[x - y]"),
            ]
        );
    }

    #[test]
    fn pytest_collection_error_that_stops_the_run_is_the_file() {
        // pytest 9.2 `-q -rA` with an import error in one test file, trimmed.
        let out = r"==================================== ERRORS ====================================
____________________ ERROR collecting tests/test_broken.py _____________________
E   ModuleNotFoundError: No module named 'nonexistent_module'
=========================== short test summary info ============================
ERROR tests/test_broken.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
1 error in 0.12s
ERROR collecting tests/test_old.py
";
        assert_eq!(
            cases_from_output(Runner::Pytest, out),
            vec![error("tests/test_broken.py"), error("tests/test_old.py")]
        );
    }

    // pytest 9.2 `--junitxml -o junit_family=xunit1` of the run above, texts trimmed.
    const JUNIT: &str = r#"<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="2" failures="1" skipped="2" tests="8" time="0.048" timestamp="2026-11-29T18:40:47.834440+00:00" hostname="vm"><testcase classname="" name="tests.test_broken" file="tests/test_broken.py" time="0.000"><error message="collection failure">ImportError while importing test module '/tmp/cap/py/tests/test_broken.py'.
E   ModuleNotFoundError: No module named 'nonexistent_module'</error></testcase><testcase classname="tests.test_calc.TestCalc" name="test_add[1-2]" file="tests/test_calc.py" line="6" time="0.000" /><testcase classname="tests.test_calc.TestCalc" name="test_add[2-2]" file="tests/test_calc.py" line="6" time="0.001"><failure message="assert 4 == 3&#10; +  where 4 = add(2, 2)">tests/test_calc.py:9: AssertionError</failure></testcase><testcase classname="tests.test_calc.TestCalc" name="test_sub" file="tests/test_calc.py" line="10" time="0.000" /><testcase classname="tests.test_calc" name="test_skip" file="tests/test_calc.py" line="13" time="0.000"><skipped type="pytest.skip" message="not today">/tmp/cap/py/tests/test_calc.py:15: not today</skipped></testcase><testcase classname="tests.test_calc" name="test_xfail" file="tests/test_calc.py" line="16" time="0.000"><skipped type="pytest.xfail" message="known" /></testcase><testcase classname="tests.test_calc" name="test_xpass" file="tests/test_calc.py" line="20" time="0.000" /><testcase classname="tests.test_calc" name="test_fixture_error" file="tests/test_calc.py" line="28" time="0.000"><error message="failed on setup with &quot;RuntimeError: fixture boom&quot;">tests/test_calc.py:27: RuntimeError</error></testcase></testsuite></testsuites>"#;

    #[test]
    fn junit_rebuilds_pytest_node_ids() {
        assert_eq!(
            cases_from_junit(JUNIT),
            Ok(vec![
                error("tests/test_broken.py"),
                passed("tests/test_calc.py::TestCalc::test_add[1-2]"),
                failed("tests/test_calc.py::TestCalc::test_add[2-2]"),
                passed("tests/test_calc.py::TestCalc::test_sub"),
                skipped("tests/test_calc.py::test_skip"),
                skipped("tests/test_calc.py::test_xfail"),
                passed("tests/test_calc.py::test_xpass"),
                failed("tests/test_calc.py::test_fixture_error"),
            ])
        );
    }

    #[test]
    fn junit_names_the_test_module_of_an_inherited_test() {
        let xml = r#"<testsuite><testcase classname="tests.test_db.TestSqlite" name="test_get" file="tests/base.py" line="3" /></testsuite>"#;
        assert_eq!(
            cases_from_junit(xml),
            Ok(vec![passed("tests/test_db.py::TestSqlite::test_get")])
        );
    }

    #[test]
    fn malformed_junit_is_an_error_that_says_so() {
        let err = cases_from_junit("<testsuite><testcase").unwrap_err();
        assert!(
            err.starts_with("the JUnit XML report is not well-formed XML: "),
            "{err}"
        );
    }

    // Python 3.11 `python3 -m unittest -v`, trimmed: a load_tests module adding doctests, an
    // import error, a docstring, a subtest failure.
    const UNITTEST_VERBOSE: &str = concat!(
        r"test_broken (unittest.loader._FailedTest.test_broken) ... ERROR
test_add (test_calc.TestCalc.test_add) ... ok
test_doc (test_calc.TestCalc.test_doc)
Adds with a docstring. ... FAIL
test_error (test_calc.TestCalc.test_error) ... ERROR
test_skip (test_calc.TestCalc.test_skip) ... skipped 'why not'
",
        "test_sub (test_calc.TestCalc.test_sub) ... \n",
        r"  test_sub (test_calc.TestCalc.test_sub) (i=1) ... FAIL
  test_sub (test_calc.TestCalc.test_sub) (i=2) ... FAIL
test_xfail (test_calc.TestCalc.test_xfail) ... expected failure
test_xpass (test_calc.TestCalc.test_xpass) ... unexpected success
add (calc)
Doctest: calc.add ... ok
sub (calc)
Doctest: calc.sub ... FAIL

======================================================================
ERROR: test_broken (unittest.loader._FailedTest.test_broken)
----------------------------------------------------------------------
ImportError: Failed to import test module: test_broken
ModuleNotFoundError: No module named 'nonexistent_module'

======================================================================
FAIL: test_doc (test_calc.TestCalc.test_doc)
Adds with a docstring.
----------------------------------------------------------------------
AssertionError: 2 != 3

----------------------------------------------------------------------
Ran 10 tests in 0.003s

FAILED (failures=4, errors=2, skipped=1, expected failures=1, unexpected successes=1)
"
    );

    #[test]
    fn unittest_verbose_names_tests_by_id() {
        assert_eq!(
            cases_from_output(Runner::Unittest, UNITTEST_VERBOSE),
            vec![
                error("test_broken"),
                passed("test_calc.TestCalc.test_add"),
                failed("test_calc.TestCalc.test_doc"),
                failed("test_calc.TestCalc.test_error"),
                skipped("test_calc.TestCalc.test_skip"),
                failed("test_calc.TestCalc.test_sub"),
                skipped("test_calc.TestCalc.test_xfail"),
                failed("test_calc.TestCalc.test_xpass"),
                passed("calc.add"),
                failed("calc.sub"),
            ]
        );
    }

    #[test]
    fn unittest_before_3_11_and_output_between_a_test_and_its_status() {
        let out = r"test_add (test_calc.TestCalc) ... ok
test_noisy (test_calc.TestCalc) ... printing from the test
more output
ok
setUpClass (test_db.TestDb) ... ERROR
test_hangs (test_calc.TestCalc) ... ";
        assert_eq!(
            cases_from_output(Runner::Unittest, out),
            vec![
                passed("test_calc.TestCalc.test_add"),
                passed("test_calc.TestCalc.test_noisy"),
                error("test_db.TestDb.setUpClass"),
                failed("test_calc.TestCalc.test_hangs"),
            ]
        );
    }

    #[test]
    fn unittest_without_verbose_names_the_failures() {
        let out = r"E.F
======================================================================
ERROR: test_calc (unittest.loader._FailedTest)
----------------------------------------------------------------------
======================================================================
FAIL: test_add (test_calc.TestCalc.test_add)
----------------------------------------------------------------------
Ran 3 tests in 0.001s
";
        assert_eq!(
            cases_from_output(Runner::Unittest, out),
            vec![error("test_calc"), failed("test_calc.TestCalc.test_add")]
        );
    }

    // cargo 1.95 `cargo test --no-fail-fast`, backtraces cut.
    const CARGO: &str = r"   Compiling calc v0.1.0 (/tmp/cap/calc)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.36s
     Running unittests src/lib.rs (target/debug/deps/calc-c6626fb655a8d231)

running 4 tests
test tests::adds ... ok
test tests::fails ... FAILED
test tests::panics - should panic ... ok
test tests::slow ... ignored

failures:

---- tests::fails stdout ----
some output

thread 'tests::fails' (28880) panicked at src/lib.rs:26:9:
assertion `left == right` failed
  left: 4
 right: 5

failures:
    tests::fails

test result: FAILED. 2 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.08s

error: test failed, to rerun pass `--lib`
     Running tests/calc.rs (target/debug/deps/calc-80f166f2dd2d63d2)

running 1 test
test adds ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

   Doc-tests calc

running 2 tests
test src/lib.rs - add (line 3) ... ok
test src/lib.rs - add (line 7) ... FAILED

failures:

---- src/lib.rs - add (line 7) stdout ----
Test executable failed (exit status: 101).

failures:
    src/lib.rs - add (line 7)

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.07s
";

    #[test]
    fn cargo_names_tests_by_target_and_doc_tests_without_line_numbers() {
        assert_eq!(
            cases_from_output(Runner::Cargo, CARGO),
            vec![
                passed("src/lib.rs::tests::adds"),
                failed("src/lib.rs::tests::fails"),
                passed("src/lib.rs::tests::panics"),
                skipped("src/lib.rs::tests::slow"),
                passed("tests/calc.rs::adds"),
                passed("doc src/lib.rs - add"),
                failed("doc src/lib.rs - add #2"),
            ]
        );
    }

    #[test]
    fn cargo_doc_tests_on_one_item_are_numbered_by_line_not_by_name_order() {
        // libtest sorts names as text: `(line 12)` comes before `(line 8)`.
        let out = "   Doc-tests calc\n\
                   test src/lib.rs - add (line 12) ... FAILED\n\
                   test src/lib.rs - add (line 8) ... ok\n";
        assert_eq!(
            cases_from_output(Runner::Cargo, out),
            vec![
                failed("doc src/lib.rs - add #2"),
                passed("doc src/lib.rs - add")
            ]
        );
    }

    #[test]
    fn cargo_workspace_members_sharing_a_path_are_told_apart_by_crate() {
        // cargo 1.95 `cargo test` in a workspace of crates a and b, trimmed.
        let out = r"     Running unittests src/lib.rs (target/debug/deps/a-3110576fc3c3c96d)
test tests::it_works ... ok
     Running unittests src/lib.rs (target/debug/deps/b-d297d743c1d6421f)
test tests::it_works ... ok
     Running tests/api.rs (target/debug/deps/api-0123456789abcdef)
test serves ... ok
     Running target/debug/deps/old-0123456789abcdef
test works ... ok
   Doc-tests b
test b/src/lib.rs - f (line 1) ... ok
";
        assert_eq!(
            cases_from_output(Runner::Cargo, out),
            vec![
                passed("src/lib.rs (a)::tests::it_works"),
                passed("src/lib.rs (b)::tests::it_works"),
                passed("tests/api.rs::serves"),
                passed("old::works"),
                passed("doc b/src/lib.rs - f"),
            ]
        );
    }

    #[test]
    fn cargo_status_after_the_tests_own_output() {
        // cargo 1.95 `cargo test --lib -- --nocapture --test-threads=1`, trimmed.
        let out = r"     Running unittests src/lib.rs (target/debug/deps/calc-c6626fb655a8d231)

running 4 tests
test tests::adds ... ok
test tests::fails ... some output

thread 'tests::fails' (28964) panicked at src/lib.rs:26:9:
assertion `left == right` failed
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace
FAILED
test tests::panics - should panic ... 
thread 'tests::panics' (28965) panicked at src/lib.rs:36:9:
boom
ok
test tests::slow ... ignored, needs a database
test tests::aborts ... ";
        assert_eq!(
            cases_from_output(Runner::Cargo, out),
            vec![
                passed("src/lib.rs::tests::adds"),
                failed("src/lib.rs::tests::fails"),
                passed("src/lib.rs::tests::panics"),
                skipped("src/lib.rs::tests::slow"),
                failed("src/lib.rs::tests::aborts"),
            ]
        );
    }

    // `go test -v ./...`, written from the format's documentation (no Go on this machine).
    const GO_VERBOSE: &str = "=== RUN   TestAdd
=== RUN   TestAdd/positive
=== RUN   TestAdd/negative
    calc_test.go:21: Add(-1, -2) = -1; want -3
--- FAIL: TestAdd (0.00s)
    --- PASS: TestAdd/positive (0.00s)
    --- FAIL: TestAdd/negative (0.00s)
=== RUN   TestSub
--- PASS: TestSub (0.00s)
=== RUN   TestMul
    calc_test.go:35: not implemented yet
--- SKIP: TestMul (0.00s)
FAIL
FAIL\texample.com/calc\t0.003s
=== RUN   TestParse
--- PASS: TestParse (0.00s)
PASS
ok  \texample.com/calc/parse\t0.002s
?   \texample.com/calc/cmd/calc\t[no test files]
FAIL
";

    #[test]
    fn go_verbose_names_tests_and_subtests_by_package() {
        assert_eq!(
            cases_from_output(Runner::Go, GO_VERBOSE),
            vec![
                failed("example.com/calc.TestAdd"),
                passed("example.com/calc.TestAdd/positive"),
                failed("example.com/calc.TestAdd/negative"),
                passed("example.com/calc.TestSub"),
                skipped("example.com/calc.TestMul"),
                passed("example.com/calc/parse.TestParse"),
            ]
        );
    }

    #[test]
    fn go_without_verbose_build_failures_and_timeouts() {
        let out = "--- FAIL: TestAdd (0.00s)
    --- FAIL: TestAdd/negative (0.00s)
        calc_test.go:21: Add(-1, -2) = -1; want -3
FAIL
FAIL\texample.com/calc\t0.003s
# example.com/calc/parse [example.com/calc/parse.test]
./parse_test.go:9:9: undefined: Parse
FAIL\texample.com/calc/parse [build failed]
=== RUN   TestSlow
panic: test timed out after 1s
\trunning tests:
\t\tTestSlow (1s)
FAIL\texample.com/calc/slow\t1.012s
ok  \texample.com/calc/fast\t(cached)
FAIL
";
        assert_eq!(
            cases_from_output(Runner::Go, out),
            vec![
                failed("example.com/calc.TestAdd"),
                failed("example.com/calc.TestAdd/negative"),
                error("example.com/calc/parse"),
                failed("example.com/calc/slow.TestSlow"),
            ]
        );
    }

    // Node 20.20 `node --test` piped (TAP), YAML blocks trimmed; two files, not wrapped.
    const NODE_TAP: &str = r"TAP version 13
# Subtest: calc
    # Subtest: add
        # Subtest: adds two numbers
        ok 1 - adds two numbers
          ---
          duration_ms: 0.620492
          ...
        # Subtest: fails on purpose
        not ok 2 - fails on purpose
          ---
          duration_ms: 1.064282
          failureType: 'testCodeFailure'
          error: |-
            Expected values to be strictly equal:
            ok 9 - not a test
          ...
        1..2
    not ok 1 - add
      ---
      type: 'suite'
      failureType: 'subtestsFailed'
      ...
    # Subtest: is skipped
    ok 2 - is skipped # SKIP not today
      ---
      duration_ms: 0.095361
      ...
    # Subtest: does later
    ok 3 - does later # TODO
      ---
      duration_ms: 0.084055
      ...
    1..3
not ok 1 - calc
  ---
  type: 'suite'
  ...
# Subtest: top level
ok 2 - top level
  ---
  duration_ms: 0.091005
  ...
# Subtest: other works
ok 3 - other works
  ---
  duration_ms: 1.013586
  ...
1..3
# tests 6
# pass 3
# fail 1
";

    // The same run with `--test-reporter=spec`, error details trimmed.
    const NODE_SPEC: &str = r"▶ calc
  ▶ add
    ✔ adds two numbers (0.63897ms)
    ✖ fails on purpose (1.115918ms)
      AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:

      4 !== 5

  ✖ add (2.338184ms)
  ﹣ is skipped (0.105417ms) # not today
  ✔ does later (0.081952ms) # TODO
✖ calc (3.262738ms)
✔ top level (0.133969ms)
✔ other works (0.998954ms)
ℹ tests 6
ℹ fail 1

✖ failing tests:

test at test/calc.test.js:10:5
✖ fails on purpose (1.115918ms)
  AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:
";

    fn node_expected() -> Vec<Case> {
        vec![
            passed("calc > add > adds two numbers"),
            failed("calc > add > fails on purpose"),
            skipped("calc > is skipped"),
            skipped("calc > does later"),
            passed("top level"),
            passed("other works"),
        ]
    }

    #[test]
    fn node_tap_names_leaves_by_their_path() {
        assert_eq!(cases_from_output(Runner::Node, NODE_TAP), node_expected());
    }

    #[test]
    fn node_spec_names_leaves_by_their_path_and_skips_the_recap() {
        assert_eq!(cases_from_output(Runner::Node, NODE_SPEC), node_expected());
    }

    #[test]
    fn node_file_that_fails_to_load_repeated_names_and_escaped_hashes() {
        // Node 20.20, TAP and spec, with the run's directory already cut from the output.
        let tap = r"TAP version 13
# Subtest: test/broken.test.js
not ok 1 - test/broken.test.js
  ---
  failureType: 'testCodeFailure'
  exitCode: 1
  ...
# Subtest: parent \# hash
    # Subtest: child one
    ok 1 - child one
      ---
      duration_ms: 0.792688
      ...
    # Subtest: child one
    ok 2 - child one
      ---
      duration_ms: 0.124966
      ...
    1..2
ok 2 - parent \# hash
  ---
  duration_ms: 1.751002
  ...
1..2
";
        let spec = r"✖ test/broken.test.js (79.184735ms)
  'test failed'

▶ parent # hash
  ✔ child one (0.830814ms)
  ✔ child one (0.121551ms)
✔ parent # hash (1.81003ms)
ℹ tests 4
";
        let expected = vec![
            error("test/broken.test.js"),
            passed("parent # hash > child one"),
            passed("parent # hash > child one #2"),
        ];
        assert_eq!(cases_from_output(Runner::Node, tap), expected);
        assert_eq!(cases_from_output(Runner::Node, spec), expected);
    }

    #[test]
    fn other_runner_tries_every_parser() {
        let out = format!("{CARGO}\n{GO_VERBOSE}");
        let cases = cases_from_output(Runner::Other, &out);
        assert_eq!(cases.len(), 13, "{cases:?}");
        assert_eq!(cases[0], passed("src/lib.rs::tests::adds"));
        assert_eq!(cases[12], passed("example.com/calc/parse.TestParse"));
        assert_eq!(
            cases_from_output(Runner::Other, PYTEST_VERBOSE),
            cases_from_output(Runner::Pytest, PYTEST_VERBOSE)
        );
        assert_eq!(
            cases_from_output(Runner::Other, UNITTEST_VERBOSE),
            cases_from_output(Runner::Unittest, UNITTEST_VERBOSE)
        );
        assert_eq!(cases_from_output(Runner::Other, NODE_TAP), node_expected());
        assert_eq!(cases_from_output(Runner::Other, "all good\n"), vec![]);
    }

    #[test]
    fn colours_do_not_hide_names() {
        let out = "\x1b[32m✔ adds (0.5ms)\x1b[39m\n";
        assert_eq!(cases_from_output(Runner::Node, out), vec![passed("adds")]);
    }

    #[test]
    fn results_json_reads_every_status_and_refuses_other_shapes() {
        let text = r#"{"tests": [{"name": "a.py::t", "status": "passed"}, {"name": "b.py", "status": "error"}, {"name": "a.py::s", "status": "skipped"}, {"name": "a.py::f", "status": "failed"}]}"#;
        assert_eq!(
            cases_from_results_json(text),
            Ok(vec![
                passed("a.py::t"),
                error("b.py"),
                skipped("a.py::s"),
                failed("a.py::f")
            ])
        );
        let err =
            cases_from_results_json(r#"{"tests": [{"name": "x", "status": "odd"}]}"#).unwrap_err();
        assert!(
            err.starts_with("the built-in runner's results file is not the expected JSON: "),
            "{err}"
        );
    }

    // The built-in runner, run for real by python3 on small projects.

    struct BuiltinRun {
        output: String,
        code: Option<i32>,
        cases: Vec<Case>,
    }

    fn run_builtin(files: &[(&str, &str)], args: &[&str]) -> BuiltinRun {
        let project = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = project.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let runner_dir = tempfile::tempdir().unwrap();
        let script = runner_dir.path().join("agent_git_runner.py");
        std::fs::write(&script, crate::testrun::BUILTIN_PYTHON_RUNNER).unwrap();
        let results = runner_dir.path().join("results.json");
        let out = Command::new("python3")
            .arg(&script)
            .args(args)
            .current_dir(project.path())
            .env("AGENT_GIT_RESULTS", &results)
            .env_remove("PYTHONPATH")
            .output()
            .unwrap();
        let output = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        BuiltinRun {
            output: relative(&output, project.path()),
            code: out.status.code(),
            cases: cases_from_results_json(&std::fs::read_to_string(results).unwrap()).unwrap(),
        }
    }

    /// As the caller does: the run's directory cut from the output.
    fn relative(output: &str, dir: &Path) -> String {
        let canonical = dir.canonicalize().unwrap();
        output
            .replace(&format!("{}/", canonical.display()), "")
            .replace(&format!("{}/", dir.display()), "")
    }

    const CALC: &str = "def add(a, b):\n    \"\"\"\n    >>> add(2, 3)\n    5\n    \"\"\"\n    return a - b\n\n\ndef sub(a, b):\n    \"\"\"\n    >>> sub(3, 1)\n    2\n    \"\"\"\n    return a - b\n";

    const TEST_CALC: &str = r#"import unittest
from calc import add, sub


def test_add():
    result = add(2, 3)
    assert result == 5


def test_sub():
    assert sub(3, 1) == 2


def test_later():
    raise unittest.SkipTest("not yet")


class TestCalc(unittest.TestCase):
    def test_signs(self):
        for a in (1, -1):
            with self.subTest(a=a):
                self.assertEqual(add(a, 0), a * 2)

    @unittest.skip("slow")
    def test_big(self):
        pass
"#;

    const TEST_BROKEN: &str = "import nonexistent_module\n";

    #[test]
    fn builtin_runner_default_mode_reports_every_test_and_prints_failures_in_full() {
        let run = run_builtin(
            &[
                ("calc.py", CALC),
                ("tests/test_calc.py", TEST_CALC),
                ("tests/test_broken.py", TEST_BROKEN),
            ],
            &[],
        );
        let expected = vec![
            error("tests/test_broken.py"),
            failed("tests/test_calc.py::test_add"),
            passed("tests/test_calc.py::test_sub"),
            skipped("tests/test_calc.py::test_later"),
            skipped("tests/test_calc.py::TestCalc::test_big"),
            failed("tests/test_calc.py::TestCalc::test_signs"),
        ];
        assert_eq!(run.cases, expected, "{}", run.output);
        assert_eq!(run.code, Some(1), "{}", run.output);
        let out = &run.output;
        for wanted in [
            "  File \"tests/test_calc.py\", line 7, in test_add\n    assert result == 5\n",
            "AssertionError\nLocal variables in test_add:\n    result = -1\n",
            "tests/test_calc.py::TestCalc::test_signs (a=1)",
            "  File \"tests/test_broken.py\", line 1, in <module>\n",
            "\nERROR tests/test_broken.py - ModuleNotFoundError: No module named 'nonexistent_module'\n",
            "\nFAILED tests/test_calc.py::test_add - AssertionError: assert result == 5\n",
            "\nFAILED tests/test_calc.py::TestCalc::test_signs - (a=1) AssertionError: 1 != 2\n",
            "\n2 skipped\n1 passed, 3 failed\n",
        ] {
            assert!(out.contains(wanted), "missing {wanted:?} in\n{out}");
        }
        assert!(
            !out.contains("agent_git_runner"),
            "the runner's own frames show:\n{out}"
        );
        assert!(
            !out.contains("unittest/case.py"),
            "unittest's frames show:\n{out}"
        );
        assert_eq!(cases_from_output(Runner::BuiltinPython, out), expected);
    }

    #[test]
    fn builtin_runner_unittest_mode_is_unittest_discovery() {
        let load_tests = format!(
            "import doctest\nimport calc\n\n\ndef load_tests(loader, tests, pattern):\n    tests.addTests(doctest.DocTestSuite(calc))\n    return tests\n\n\n{TEST_CALC}"
        );
        let run = run_builtin(
            &[
                ("calc.py", CALC),
                ("test_calc.py", &load_tests),
                ("test_broken.py", TEST_BROKEN),
            ],
            &["--unittest"],
        );
        // unittest ignores plain functions; the doctests come from load_tests.
        let expected = vec![
            error("test_broken"),
            skipped("test_calc.TestCalc.test_big"),
            failed("test_calc.TestCalc.test_signs"),
            failed("calc.add"),
            passed("calc.sub"),
        ];
        assert_eq!(run.cases, expected, "{}", run.output);
        assert_eq!(run.code, Some(1), "{}", run.output);
        let out = &run.output;
        for wanted in [
            "test_signs (test_calc.TestCalc.test_signs) ... \n  test_signs (test_calc.TestCalc.test_signs) (a=1) ... FAIL\n",
            "Doctest: calc.add ... FAIL\n",
            "  File \"test_calc.py\", line 31, in test_signs\n",
            "\nERROR test_broken - ModuleNotFoundError: No module named 'nonexistent_module'\n",
            "\nFAILED test_calc.TestCalc.test_signs - (a=1) AssertionError: 1 != 2\n",
            "\n1 skipped\n1 passed, 3 failed\n",
        ] {
            assert!(out.contains(wanted), "missing {wanted:?} in\n{out}");
        }
        assert!(
            !out.contains("agent_git_runner"),
            "the runner's own frames show:\n{out}"
        );
        assert_eq!(cases_from_output(Runner::BuiltinPython, out), expected);
        assert_eq!(cases_from_output(Runner::Unittest, out), expected);
    }

    #[test]
    fn builtin_runner_exit_status_says_passed_failed_or_nothing_found() {
        let green = run_builtin(&[("test_ok.py", "def test_ok():\n    assert True\n")], &[]);
        assert_eq!(
            (green.code, green.cases),
            (Some(0), vec![passed("test_ok.py::test_ok")])
        );
        let empty = run_builtin(&[("README.md", "no tests\n")], &[]);
        assert_eq!((empty.code, empty.cases), (Some(5), vec![]));
        let empty = run_builtin(&[("README.md", "no tests\n")], &["--unittest"]);
        assert_eq!((empty.code, empty.cases), (Some(5), vec![]));
    }
}
