//! What the tree says about the environment its tests need, and whether a first test run
//! failed for want of it: a package under `src/` that only an install would put on the path,
//! a dependency declared but not installed, a runner or toolchain that is missing. Pure: the
//! files come from the base commit, the output from the run before any change.

use super::{Status, TestResult};
use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

/// What the base's files say that tells a broken environment from broken code.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeFacts {
    /// Each top-level Python module or package of the tree, and the folder it is under: `""`
    /// for the root, `"src"` for a src layout.
    pub python_modules: BTreeMap<String, String>,
    /// The names the project's dependency files declare (requirements, pyproject.toml,
    /// setup.cfg, setup.py, tox.ini), lower-case, `-` as `_`.
    pub declared: BTreeSet<String>,
    /// The Python test files by pytest's default conventions (`test_*.py`, `*_test.py`).
    pub python_test_files: Vec<String>,
}

/// The files that declare a Python project's dependencies.
const DEPENDENCY_FILES: [&str; 5] = [
    "pyproject.toml",
    "setup.cfg",
    "setup.py",
    "tox.ini",
    "requirements.txt",
];

impl TreeFacts {
    /// `paths` are the base's files, `read` their text.
    pub fn of(paths: &[String], read: &dyn Fn(&str) -> Option<String>) -> Self {
        let mut facts = TreeFacts::default();
        for path in paths.iter().filter(|p| p.ends_with(".py")) {
            if super::detect::is_python_test_file(path) {
                facts.python_test_files.push(path.clone());
            }
            let parts: Vec<&str> = path.split('/').collect();
            let (folder, name) = match parts.as_slice() {
                ["src", name, ..] if parts.len() > 2 || name.ends_with(".py") => ("src", *name),
                [name, ..] => ("", *name),
                [] => continue,
            };
            let name = name.trim_end_matches(".py");
            if name.is_empty() || name == "__init__" {
                continue;
            }
            // A module at the root wins: it is what `import name` finds from the root.
            let entry = facts.python_modules.entry(name.to_string());
            let held = entry.or_insert_with(|| folder.to_string());
            if folder.is_empty() {
                *held = String::new();
            }
        }
        let requirements = paths.iter().filter(|p| {
            let name = p.rsplit('/').next().unwrap_or(p);
            name.starts_with("requirements") && name.ends_with(".txt")
        });
        let texts = DEPENDENCY_FILES
            .iter()
            .map(|f| f.to_string())
            .chain(requirements.cloned());
        for text in texts.filter_map(|f| read(&f)) {
            facts.declared.extend(words(&text));
        }
        facts
    }

    /// The package a src layout needs on `sys.path`, the way an editable install puts it
    /// there: one that lives only under `src/` and that a test file (or conftest.py) imports.
    /// The files are read one by one until one does.
    pub fn src_layout(
        &self,
        conftests: &[String],
        read: &dyn Fn(&str) -> Option<String>,
    ) -> Option<String> {
        let under_src: Vec<&String> = self
            .python_modules
            .iter()
            .filter(|(_, folder)| *folder == "src")
            .map(|(name, _)| name)
            .collect();
        if under_src.is_empty() {
            return None;
        }
        self.python_test_files
            .iter()
            .chain(conftests)
            .filter_map(|path| read(path))
            .find_map(|text| {
                under_src
                    .iter()
                    .find(|name| imports(&text, name))
                    .map(|n| n.to_string())
            })
    }
}

/// Whether Python source `text` imports module `name` (`import name`, `from name...`).
fn imports(text: &str, name: &str) -> bool {
    text.lines().any(|line| {
        let line = line.trim_start();
        let rest = line
            .strip_prefix("import ")
            .or_else(|| line.strip_prefix("from "));
        rest.is_some_and(|r| {
            r.split([',', ' ']).any(|m| {
                let m = m.trim();
                m == name || m.starts_with(&format!("{name}."))
            })
        })
    })
}

/// The identifiers of a dependency file, normalised as package names are.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-' || c == '.'))
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase().replace('-', "_"))
}

/// How the built-in runner says it found a test only pytest can run (it exits 5, no verdict).
const NEEDS_PYTEST: &str = "agent-git-runner: needs pytest: ";

struct Signs {
    missing_module: Regex,
    file_line: Regex,
    missing_script: Regex,
    cargo_offline: Regex,
}

fn signs() -> &'static Signs {
    static SIGNS: OnceLock<Signs> = OnceLock::new();
    SIGNS.get_or_init(|| {
        let re = |p: &str| Regex::new(p).unwrap_or_else(|e| panic!("bad built-in regex {p}: {e}"));
        Signs {
            missing_module: re(r#"No module named '?([A-Za-z_][A-Za-z0-9_]*)"#),
            file_line: re(r#"File "([^"]+)", line \d+"#),
            missing_script: re(concat!(
                r"(?m)(?:^\S*sh: (?:\d+: )?(?:cannot open|Can't open) (.+?): No such file",
                r"|^\S*sh: (?:line \d+: )?(.+?): No such file or directory",
                r"|can't open file '([^']+)': \[Errno 2\])"
            )),
            cargo_offline: re(
                r"(?m)no matching package named `([^`]+)` found|failed to download|failed to get `([^`]+)` as a dependency|attempting to make an HTTP request, but --offline",
            ),
        }
    })
}

/// Why a result before any change shows that the tests cannot run as they are, if it does:
/// one paragraph with the first error line, why it is the environment and not the code, and
/// the fix. Tests that run and fail, or a mix of modules that load and modules that do not,
/// are the model's to fix: None.
pub fn cannot_run(result: &TestResult, facts: &TreeFacts) -> Option<String> {
    if !result.ran {
        return Some(format!("the test command could not start: {}", result.tail));
    }
    let output = result.tail.as_str();
    let said = |needle: &str| output.contains(needle);
    let s = signs();
    if let Some(module) = s
        .missing_module
        .captures_iter(output)
        .map(|c| c[1].to_string())
        .find(|m| m == "pytest")
    {
        return Some(format!(
            "No module named '{module}': pytest is not installed for the python3 the tests run \
             with. Install it there (`python3 -m pip install pytest`, or in the project's venv), \
             or set a command that does not need it with `git config agent-git.testCmd CMD`"
        ));
    }
    let fixed = |why: &str| {
        Some(format!(
            "{why}; set the command with `git config agent-git.testCmd CMD`"
        ))
    };
    if let Some(why) = node_modules_missing(result) {
        return Some(why);
    }
    if let Some(what) = output.lines().find_map(|l| l.strip_prefix(NEEDS_PYTEST)) {
        return Some(format!(
            "{what}: the built-in runner, used because pytest is not installed, cannot run these \
             tests as pytest would, and a pass it gave could fail under pytest. Install pytest \
             for the python3 the tests run with (`python3 -m pip install pytest`, or in the \
             project's venv), or set the command with `git config agent-git.testCmd CMD`"
        ));
    }
    match result.exit_code {
        Some(126) => return fixed("the test command is not executable (exit 126)"),
        Some(127) if s.missing_script.captures(output).is_none() => {
            return fixed(&format!(
                "the test command was not found (exit 127): {}",
                first_line(output)
            ))
        }
        Some(125) if said("agent-git sandbox:") => {
            return Some("the sandbox could not start the test command".to_string())
        }
        _ => {}
    }
    if let Some(c) = s.missing_script.captures(output) {
        let script = (1..=3).find_map(|i| c.get(i)).map_or("", |m| m.as_str());
        return fixed(&format!(
            "the test command names `{script}`, which is not in the repository's tree (the \
             tests run in a clean copy of the committed files, outside your checkout); commit \
             it, or name a command that is"
        ));
    }
    if said("rustup could not choose a version") || said("no default toolchain") {
        return Some(
            "no Rust toolchain is available to the tests: install one with `rustup default \
             stable`"
                .to_string(),
        );
    }
    if let Some(c) = s.cargo_offline.captures(output) {
        let what = c
            .get(1)
            .or(c.get(2))
            .map_or(String::new(), |m| format!(" (`{}`)", m.as_str()));
        return Some(format!(
            "cargo cannot resolve the crate's dependencies offline{what}: {}. The tests have no \
             network, and a dependency is not in the local registry cache. Run `cargo fetch` in \
             the repository once, then run agent-git again",
            first_line_with(output, "error").unwrap_or_else(|| first_line(output))
        ));
    }
    if said("Missing script: \"test\"") || said("missing script: test") {
        return fixed("package.json has no test script");
    }
    if said("No rule to make target") {
        return fixed("the Makefile has no such target");
    }
    if let Some(why) = protected_syntax_error(output) {
        return Some(why);
    }
    if let Some(why) = needs_network(result) {
        return Some(why);
    }
    if let Some(why) = nothing_loaded(result, facts) {
        return Some(why);
    }
    match result.exit_code {
        Some(5) if result.runner_collected_nothing() => {
            fixed("the test command collected no tests")
        }
        _ if result.runner_collected_nothing() => fixed("the test command ran no tests"),
        _ => None,
    }
}

/// A node test command whose tools come from `node_modules`, which the tree does not have.
fn node_modules_missing(result: &TestResult) -> Option<String> {
    let output = result.tail.as_str();
    let node = ["npm", "node", "npx", "yarn", "pnpm"]
        .iter()
        .any(|w| result.command.split_whitespace().any(|c| c == *w));
    if !node {
        return None;
    }
    let tool = output.lines().find_map(|l| {
        let (_, rest) = l.split_once(": ")?;
        let tool = rest.strip_suffix(": not found")?;
        Some(tool.rsplit(": ").next().unwrap_or(tool).to_string())
    });
    let cannot_find =
        output.contains("Cannot find module") || output.contains("ERR_MODULE_NOT_FOUND");
    if tool.is_none() && !cannot_find {
        return None;
    }
    let what = tool.map_or("a package".to_string(), |t| format!("`{t}`"));
    Some(format!(
        "the tests need {what}, which is not installed: {}. Install the project's packages in \
         your checkout (`npm ci`), or give agent-git `--setup-cmd \"npm ci --offline\"`",
        first_line(output)
    ))
}

/// What a test that reached for the network says where there is none.
const NO_NETWORK: [&str; 9] = [
    "Temporary failure in name resolution",
    "Name or service not known",
    "No address associated with hostname",
    "Network is unreachable",
    "getaddrinfo ENOTFOUND",
    "getaddrinfo EAI_AGAIN",
    "Could not resolve host",
    "failed to lookup address information",
    "nodename nor servname provided",
];

/// Failing tests that reached for the network: no test run here has one, so no change can
/// make them pass, and a run held to every test could never end `passed`.
fn needs_network(result: &TestResult) -> Option<String> {
    let offline = |text: &str| NO_NETWORK.iter().any(|sign| text.contains(sign));
    let names: Vec<&str> = result
        .failing
        .iter()
        .filter(|f| f.detail.as_deref().is_some_and(offline))
        .map(|f| f.name.as_str())
        .collect();
    let which = match names.as_slice() {
        [] => return None,
        [one] => format!("{one} needs"),
        many => format!("{} tests need", many.len()),
    };
    let deselect = match result.runner {
        super::Runner::Pytest => format!(
            " (with pytest: `git config agent-git.testCmd \"{} {}\"`)",
            result.command,
            names
                .iter()
                .map(|n| format!("--deselect '{n}'"))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        _ => String::new(),
    };
    Some(format!(
        "{which} the network, which the tests never have here (no route out of the sandbox): \
         {}. No change to the code can make them pass. Leave them out of the test \
         command{deselect}, or mark them to be skipped without a network",
        names.join(", ")
    ))
}

/// A syntax error in a test file or conftest.py: the model may not change those files, so
/// no change of its can make the tests load.
fn protected_syntax_error(output: &str) -> Option<String> {
    let lines: Vec<&str> = output.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let Some(c) = signs().file_line.captures(line) else {
            continue;
        };
        let path = &c[1];
        let name = path.rsplit('/').next().unwrap_or(path);
        let test_file = super::detect::is_python_test_file(name) || name == "conftest.py";
        let error = lines[i + 1..].iter().take(6).find(|l| {
            ["SyntaxError", "IndentationError", "TabError"]
                .iter()
                .any(|e| l.contains(e))
        });
        if let (true, Some(error)) = (test_file, error) {
            return Some(format!(
                "{}, in {path}: a test file, which agent-git never lets the model change, does \
                 not compile, so no change to the code can make its tests run. Fix the test \
                 file and commit it, then run agent-git again",
                error.trim().trim_start_matches("E ").trim()
            ));
        }
    }
    None
}

/// Every test module failed to load, for a module the tree has where the tests do not look
/// (a src layout not installed) or a dependency the project declares but that is not
/// installed: nothing the model changes in the code can fix that.
fn nothing_loaded(result: &TestResult, facts: &TreeFacts) -> Option<String> {
    // pytest stops before any test when a conftest.py cannot be imported (exit 4).
    let conftest = result.tail.contains("ImportError while loading conftest");
    if !conftest && !every_module_failed_to_load(result) {
        return None;
    }
    let module = signs()
        .missing_module
        .captures_iter(&result.tail)
        .map(|c| c[1].to_string())
        .next()?;
    let first = first_line_with(&result.tail, "No module named").unwrap_or_default();
    let first = first.trim_start_matches("E ").trim();
    let key = module.to_lowercase();
    let why = match facts.python_modules.get(&module).map(String::as_str) {
        Some("src") => format!(
            "`{module}` is under src/ and nothing puts src/ on the path (no editable install the \
             tests can see). Set `git config agent-git.testCmd \"PYTHONPATH=src python3 -m \
             pytest -q\"`, or install the project (`pip install -e .`) in the python3 the tests \
             run with"
        ),
        Some(_) => format!(
            "`{module}` is in the repository but the tests cannot import it from where they \
             run; set the command that runs them the way you do with `git config \
             agent-git.testCmd CMD`"
        ),
        None if facts.declared.contains(&key) => format!(
            "`{module}` is a dependency the project declares, and it is not installed for the \
             python3 the tests run with (the tests have no network). Install the project's \
             dependencies (`pip install -e .` or `pip install -r requirements.txt`) in it, or \
             activate the venv that has them, then run agent-git again"
        ),
        None => return None,
    };
    let what = match conftest {
        true => "a conftest.py, which every test needs, failed to load",
        false => "every test module failed to load before any test ran",
    };
    Some(format!(
        "{first}: {what}, so no change to the code can make them pass. {why}"
    ))
}

/// Whether no test ran and every failure is a module that could not be imported.
fn every_module_failed_to_load(result: &TestResult) -> bool {
    let Some(counts) = result.counts else {
        return false;
    };
    if counts.passed > 0 || counts.failed == 0 {
        return false;
    }
    match &result.cases {
        Some(cases) => cases
            .iter()
            .all(|c| c.status == Status::Error || load_failure(result, &c.name)),
        None => {
            !result.failing.is_empty()
                && result.failing.iter().all(|f| load_failure(result, &f.name))
        }
    }
}

/// Whether a failing test's name or detail says its module could not be imported.
fn load_failure(result: &TestResult, name: &str) -> bool {
    let detail = result
        .failing
        .iter()
        .find(|f| f.name == name)
        .and_then(|f| f.detail.as_deref())
        .unwrap_or("");
    detail.contains("ModuleNotFoundError")
        || detail.contains("ImportError")
        || detail.contains("No module named")
        || result.cases.as_ref().is_some_and(|cases| {
            cases
                .iter()
                .any(|c| c.name == name && c.status == Status::Error)
        })
}

fn first_line(output: &str) -> String {
    output
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_string()
}

fn first_line_with(output: &str, needle: &str) -> Option<String> {
    output
        .lines()
        .find(|l| l.contains(needle))
        .map(|l| l.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testrun::{Ended, TestPlan};
    use std::time::Duration;

    fn facts(files: &[(&str, &str)]) -> TreeFacts {
        let paths: Vec<String> = files.iter().map(|(p, _)| p.to_string()).collect();
        let read = |name: &str| {
            files
                .iter()
                .find(|(p, _)| *p == name)
                .map(|(_, t)| t.to_string())
        };
        TreeFacts::of(&paths, &read)
    }

    /// The run before any change of `command`, which printed `output` and exited `code`.
    fn first_run(command: &str, output: &str, code: i32) -> TestResult {
        let plan = TestPlan::shell(command.into(), Duration::from_secs(9));
        let ended = Ended {
            exit_code: Some(code),
            timed_out: false,
            interrupted: false,
        };
        TestResult::read(&plan, output, ended, None)
    }

    const SRC_LAYOUT: [(&str, &str); 3] = [
        ("src/cachetools/__init__.py", ""),
        (
            "tests/test_cache.py",
            "import unittest\n\nimport cachetools\n",
        ),
        (
            "pyproject.toml",
            "[project]\ndependencies = [\"Requests>=2\"]\n",
        ),
    ];

    #[test]
    fn a_package_only_under_src_is_put_on_the_path_when_the_tests_import_it() {
        let tree = facts(&SRC_LAYOUT);
        assert_eq!(tree.python_modules["cachetools"], "src");
        let read = |text: &'static str| move |_: &str| Some(text.to_string());
        assert_eq!(
            tree.src_layout(&[], &read(SRC_LAYOUT[1].1)),
            Some("cachetools".to_string())
        );
        let unrelated = read("import os\nfrom cachetoolsx import y\n");
        assert_eq!(tree.src_layout(&[], &unrelated), None);
        let flat = facts(&[("cachetools/__init__.py", ""), ("src/cachetools/x.py", "")]);
        assert_eq!(
            flat.python_modules["cachetools"], "",
            "the root's copy is imported"
        );
    }

    #[test]
    fn every_module_failing_to_import_the_projects_package_cannot_run() {
        let output = "EEE\nERROR: tests.test_a (unittest.loader._FailedTest.tests.test_a)\n\
            ----\nImportError: Failed to import test module: tests.test_a\n\
            ModuleNotFoundError: No module named 'cachetools'\n\n----\n\
            Ran 3 tests in 0.001s\n\nFAILED (errors=3)\n";
        let result = first_run("python3 -m unittest", output, 1);
        let why = cannot_run(&result, &facts(&SRC_LAYOUT)).expect("cannot run");
        assert!(why.starts_with("ModuleNotFoundError: No module named 'cachetools': every test module failed to load"), "{why}");
        assert!(why.contains("PYTHONPATH=src"), "{why}");

        let dependency = output.replace("cachetools", "requests");
        let result = first_run("python3 -m unittest", &dependency, 1);
        let why = cannot_run(&result, &facts(&SRC_LAYOUT)).expect("cannot run");
        assert!(why.contains("a dependency the project declares"), "{why}");

        // A module nobody declares may be the one the task is to write: the model goes on.
        let unknown = output.replace("cachetools", "newmodule");
        let result = first_run("python3 -m unittest", &unknown, 1);
        assert_eq!(cannot_run(&result, &facts(&SRC_LAYOUT)), None);
    }

    #[test]
    fn a_conftest_that_cannot_import_a_declared_dependency_cannot_run() {
        let output = "ImportError while loading conftest 'tests/conftest.py'.\n\
            tests/conftest.py:7: in <module>\n    from flask import Flask\n\
            src/flask/globals.py:6: in <module>\n    from werkzeug.local import LocalProxy\n\
            E   ModuleNotFoundError: No module named 'werkzeug'\n";
        let result = first_run("python3 -m pytest -q", output, 4);
        let tree = facts(&[
            ("src/flask/__init__.py", ""),
            (
                "pyproject.toml",
                "dependencies = [\n    \"Werkzeug>=3.1.0\",\n]\n",
            ),
        ]);
        let why = cannot_run(&result, &tree).expect("cannot run");
        assert!(
            why.starts_with("ModuleNotFoundError: No module named 'werkzeug': a conftest.py"),
            "{why}"
        );
        assert!(why.contains("a dependency the project declares"), "{why}");
    }

    #[test]
    fn tests_that_reach_for_the_network_are_named_with_how_to_leave_them_out() {
        let output = "FAILED tests/test_get.py::test_get - requests.exceptions.ConnectionError: \
            HTTPConnectionPool(host='httpbin.org', port=80): Max retries exceeded (Caused by \
            NameResolutionError: Failed to resolve 'httpbin.org' ([Errno -3] Temporary failure in \
            name resolution))\nFAILED tests/test_calc.py::test_add - assert -1 == 5\n\
            2 failed, 3 passed in 0.2s\n";
        let result = first_run("python3 -m pytest -q", output, 1);
        let why = cannot_run(&result, &TreeFacts::default()).expect("cannot run");
        assert!(
            why.starts_with("tests/test_get.py::test_get needs the network"),
            "{why}"
        );
        assert!(
            why.contains("`git config agent-git.testCmd \"python3 -m pytest -q --deselect 'tests/test_get.py::test_get'\"`"),
            "{why}"
        );
        assert!(!why.contains("test_add"), "{why}");
    }

    #[test]
    fn tests_that_run_and_fail_or_a_mix_of_loading_modules_go_on() {
        let mixed = "E.F\nERROR: tests.test_a (unittest.loader._FailedTest.tests.test_a)\n\
            ----\nModuleNotFoundError: No module named 'cachetools'\n\n\
            FAIL: test_x (tests.test_b.T.test_x)\n----\nAssertionError\n\n----\n\
            Ran 3 tests in 0.001s\n\nFAILED (failures=1, errors=1)\n";
        let result = first_run("python3 -m unittest", mixed, 1);
        assert_eq!(cannot_run(&result, &facts(&SRC_LAYOUT)), None);
        let failing = first_run(
            "python3 -m pytest -q",
            "FAILED t.py::test_add - assert -1 == 5\n1 failed, 1 passed in 0.01s\n",
            1,
        );
        assert_eq!(cannot_run(&failing, &TreeFacts::default()), None);
    }

    #[test]
    fn a_missing_runner_toolchain_or_script_cannot_run() {
        let cases = [
            (
                "python3 -m pytest -q",
                "/usr/bin/python3: No module named 'pytest'\n",
                1,
                "pytest is not installed",
            ),
            (
                "python3 -m pytest -q",
                "/usr/bin/python3: No module named pytest\n",
                1,
                "pytest is not installed",
            ),
            (
                "cargo test -q",
                "error: no matching package named `criterion` found\nlocation searched: registry `crates-io`\nrequired by package `semver v1.0.0`\nAs a reminder, you're using offline mode (--offline)\n",
                101,
                "cargo fetch",
            ),
            (
                "sh ../x.sh",
                "sh: 0: cannot open ../x.sh: No such file\n",
                2,
                "names `../x.sh`, which is not in the repository's tree",
            ),
            (
                "bash scripts/t.sh",
                "bash: scripts/t.sh: No such file or directory\n",
                127,
                "names `scripts/t.sh`",
            ),
            (
                "python3 run_tests.py",
                "python3: can't open file '/room/run_tests.py': [Errno 2] No such file or directory\n",
                2,
                "names `/room/run_tests.py`",
            ),
            (
                "npm test",
                "> x@1.0.0 test\n> mocha\n\nsh: 1: mocha: not found\n",
                127,
                "npm ci",
            ),
            (
                "python3 agent-git-runner",
                "agent-git-runner: needs pytest: tests/test_io.py::test_w takes fixture arguments (tmp_path)\n",
                5,
                "tests/test_io.py::test_w takes fixture arguments (tmp_path): the built-in runner",
            ),
            (
                "nosuchtool",
                "sh: 1: nosuchtool: not found\n",
                127,
                "was not found (exit 127)",
            ),
        ];
        for (command, output, code, says) in cases {
            let result = first_run(command, output, code);
            let why = cannot_run(&result, &TreeFacts::default());
            assert!(
                why.as_deref().is_some_and(|w| w.contains(says)),
                "{command}: {why:?} should say {says:?}"
            );
        }
    }

    #[test]
    fn a_syntax_error_in_a_test_file_cannot_run_but_one_in_the_code_goes_on() {
        let in_test = "==== ERROR collecting tests/test_calc.py ====\n\
            E     File \"tests/test_calc.py\", line 3\nE       def test_add(\n\
            E                   ^\nE   SyntaxError: '(' was never closed\n\
            ERROR tests/test_calc.py\n1 error in 0.05s\n";
        let result = first_run("python3 -m pytest -q", in_test, 2);
        let why = cannot_run(&result, &TreeFacts::default()).expect("cannot run");
        assert!(
            why.starts_with("SyntaxError: '(' was never closed, in tests/test_calc.py"),
            "{why}"
        );
        let in_code = in_test.replace("File \"tests/test_calc.py\"", "File \"calc.py\"");
        let result = first_run("python3 -m pytest -q", &in_code, 2);
        assert_eq!(cannot_run(&result, &TreeFacts::default()), None);
    }
}
