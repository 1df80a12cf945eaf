//! Which test command a repository uses, judged from the files of its base commit: the
//! project's own declared runner first (tox.ini, noxfile.py, a Makefile's `test` target,
//! package.json's test script), then the conventions of its language.

use super::{Runner, TestCommand, TestResult};

/// A test command found from a tree's files, before it becomes a `TestPlan`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detected {
    /// What runs.
    pub command: TestCommand,
    /// How reports name the command.
    pub label: String,
    /// Whose output the results are read from.
    pub runner: Runner,
    /// Where the command came from, for the user.
    pub source: String,
    /// The project's own runners that were passed over, and why (tox.ini's commands need a
    /// dependency that is not installed, say).
    pub passed_over: Vec<String>,
}

impl Detected {
    fn shell(command: String, runner: Runner, source: &str) -> Self {
        Detected {
            label: command.clone(),
            command: TestCommand::Shell(command),
            runner,
            source: source.to_string(),
            passed_over: Vec::new(),
        }
    }
}

/// The names GNU make looks for, in its order.
const MAKEFILES: [&str; 3] = ["GNUmakefile", "makefile", "Makefile"];

/// `paths` are the repository's files (relative, `/`-separated); `read` gives a file's text.
pub fn detect(
    paths: &[String],
    read: &dyn Fn(&str) -> Option<String>,
    python: &Python,
) -> Option<Detected> {
    let mut detected = detect_first(paths, read, python)?;
    if let Some(Err(why)) = read("tox.ini").map(|t| tox_commands(&t, python.installed)) {
        detected
            .passed_over
            .push(format!("not tox.ini's commands: {why}"));
    }
    Some(detected)
}

/// What detection asks of the python3 the tests run with.
pub struct Python<'a> {
    /// Whether `python3 -m pytest` works.
    pub pytest: bool,
    /// Whether a distribution (a tox dependency, say) is installed.
    pub installed: &'a dyn Fn(&str) -> bool,
}

fn detect_first(
    paths: &[String],
    read: &dyn Fn(&str) -> Option<String>,
    python: &Python,
) -> Option<Detected> {
    let pytest_available = python.pytest;
    let has = |name: &str| paths.iter().any(|p| p == name);
    if let Some(Ok(Some(command))) = read("tox.ini").map(|t| tox_commands(&t, python.installed)) {
        let runner = guess_runner(&command);
        return Some(Detected::shell(
            command,
            runner,
            "the [testenv] commands of tox.ini",
        ));
    }
    if let Some(text) = read("noxfile.py") {
        let session = ["tests", "test"]
            .into_iter()
            .find(|s| text.contains(&format!("def {s}(")));
        let command = match session {
            Some(s) => format!("nox -s {s}"),
            None => "nox".to_string(),
        };
        return Some(Detected::shell(command, Runner::Other, "noxfile.py"));
    }
    for makefile in MAKEFILES {
        if let Some(text) = read(makefile).filter(|t| has_make_target(t, "test")) {
            let runner = guess_runner(&make_recipe(&text, "test"));
            return Some(Detected::shell("make test".into(), runner, makefile));
        }
    }
    if let Some(script) = read("package.json").and_then(|t| npm_test_script(&t)) {
        let runner = guess_runner(&script);
        return Some(Detected::shell(
            "npm test".into(),
            runner,
            "package.json's test script",
        ));
    }
    if has("Cargo.toml") {
        // A root package's tests alone run unless asked for every member of its workspace.
        let workspace = read("Cargo.toml").is_some_and(|t| {
            t.parse::<toml::Table>()
                .is_ok_and(|table| table.contains_key("workspace") && table.contains_key("package"))
        });
        let (command, source) = match workspace {
            true => (
                "cargo test --workspace --no-fail-fast",
                "Cargo.toml (a package with a workspace: every member)",
            ),
            false => ("cargo test --no-fail-fast", "Cargo.toml"),
        };
        return Some(Detected::shell(command.into(), Runner::Cargo, source));
    }
    if has("go.mod") {
        return Some(Detected::shell(
            "go test -v ./...".into(),
            Runner::Go,
            "go.mod",
        ));
    }
    let tests: Vec<&String> = paths.iter().filter(|p| is_python_test_file(p)).collect();
    if tests.is_empty() {
        return None;
    }
    // unittest's discovery finds `test*.py` only, and only in packages: a `calc_test.py`, or
    // a tests/ folder without `__init__.py`, needs a runner that runs it.
    let discovered = |p: &&String| {
        let (dir, name) = p.rsplit_once('/').unwrap_or(("", p));
        let mut packages =
            std::iter::successors(Some(dir), |d| d.rsplit_once('/').map(|(up, _)| up))
                .filter(|d| !d.is_empty());
        name.starts_with("test") && packages.all(|d| has(&format!("{d}/__init__.py")))
    };
    if tests.iter().all(discovered)
        && tests
            .iter()
            .all(|p| read(p).is_some_and(|t| is_unittest_module(&t)))
    {
        return Some(Detected {
            command: TestCommand::BuiltinPython { unittest: true },
            label: "python3 -m unittest discover (agent-git's runner)".into(),
            runner: Runner::BuiltinPython,
            source: "test files written for unittest".into(),
            passed_over: Vec::new(),
        });
    }
    Some(if pytest_available {
        Detected::shell(
            "python3 -m pytest -q".into(),
            Runner::Pytest,
            "Python test files",
        )
    } else {
        Detected {
            command: TestCommand::BuiltinPython { unittest: false },
            label: "built-in Python runner".into(),
            runner: Runner::BuiltinPython,
            source: "Python test files, and no pytest".into(),
            passed_over: Vec::new(),
        }
    })
}

/// Which runner's output a shell command will print, from its words.
pub fn guess_runner(command: &str) -> Runner {
    let words: Vec<&str> = command.split_whitespace().collect();
    let has = |w: &str| {
        words.iter().any(|x| {
            let x = x.trim_matches(['"', '\'']);
            x == w || x.ends_with(&format!("/{w}"))
        })
    };
    let pair = |a: &str, b: &str| words.windows(2).any(|w| w[0].ends_with(a) && w[1] == b);
    if has("pytest") || has("py.test") || command.contains("-m pytest") {
        Runner::Pytest
    } else if command.contains("unittest") {
        Runner::Unittest
    } else if pair("cargo", "test") || pair("cargo", "nextest") {
        Runner::Cargo
    } else if pair("go", "test") {
        Runner::Go
    } else if pair("node", "--test") {
        Runner::Node
    } else {
        Runner::Other
    }
}

/// What the runner collects or reads beyond the defaults, as protection patterns.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Collected {
    /// Paths that may not be added, changed or deleted: unittest's discovery takes every
    /// `test*.py`, pytest its configured `python_files`, cargo the files of out-of-line test
    /// modules, make its makefiles; and every file of the tree the test command names.
    pub protected: Vec<String>,
    /// Paths no new file may take: a package unittest's discovery would import.
    pub no_new: Vec<String>,
    /// Where a new module would be imported in place of one from outside the tree: the root
    /// (`python3 -m pytest` puts it first on sys.path) and every directory that holds tests.
    pub shadows: crate::guard::Shadows,
}

/// `paths` are the base's files, `read` their text, `python_modules` the names the project's
/// Python imports from outside the tree (its standard library and installed packages).
pub fn collected(
    runner: Runner,
    command: &TestCommand,
    paths: &[String],
    read: &dyn Fn(&str) -> Option<String>,
    python_modules: &[String],
) -> Collected {
    let mut found = Collected::default();
    let unittest = matches!(command, TestCommand::BuiltinPython { unittest: true });
    match runner {
        _ if runner == Runner::Unittest || unittest => {
            found.protected.push("test*.py".into());
            found.no_new.push("__init__.py".into());
        }
        Runner::Pytest => found.protected.extend(pytest_collects(read)),
        // The modules the tests build against: a workspace or vendored copy swaps them.
        Runner::Go => found
            .protected
            .extend(["go.work", "go.work.sum", "vendor/"].map(String::from)),
        Runner::Cargo => {
            found.protected.push("benches/".into());
            for rs in paths.iter().filter(|p| p.ends_with(".rs")) {
                let text = read(rs).unwrap_or_default();
                let modules = crate::guard::rust_test_module_files(rs, &text);
                found
                    .protected
                    .extend(modules.into_iter().map(|m| format!("/{m}")));
            }
        }
        _ => {}
    }
    // Where cargo builds when nothing redirects it: the clean room builds elsewhere, so a
    // tracked `target` (a file, a link, a planted build) would meet a fresh checkout alone.
    for manifest in paths
        .iter()
        .filter(|p| p.rsplit('/').next() == Some("Cargo.toml"))
    {
        let dir = manifest.trim_end_matches("Cargo.toml");
        found.protected.push(format!("/{dir}target"));
    }
    // Make may run behind another command (`npm test` running `make check`).
    let lines = command_lines(command, read);
    let runs_make = lines
        .iter()
        .flat_map(|l| l.split_whitespace())
        .any(|w| w == "make" || w.ends_with("/make"));
    if runs_make {
        let makefiles = ["Makefile", "makefile", "GNUmakefile", "*.mk"];
        found.protected.extend(makefiles.map(String::from));
    }
    found
        .protected
        .extend(files_the_command_names(command, paths, read));
    let python = matches!(
        runner,
        Runner::Pytest | Runner::Unittest | Runner::BuiltinPython
    ) || paths.iter().any(|p| is_python_test_file(p));
    if python && !python_modules.is_empty() {
        // The root, every directory from it down to each test file (pytest puts the first
        // one without an `__init__.py` on sys.path, and a new `__init__.py` moves it up), and
        // the directories its `pythonpath` setting names.
        let mut dirs: Vec<std::path::PathBuf> = vec![std::path::PathBuf::new()];
        let tests = paths.iter().filter(|p| is_python_test_file(p));
        let configured = pytest_setting(read, "pythonpath");
        for dir in tests
            .flat_map(|t| std::path::Path::new(t).ancestors().skip(1))
            .map(std::path::Path::to_path_buf)
            .chain(
                configured
                    .iter()
                    .map(|d| std::path::PathBuf::from(d.trim_end_matches('/'))),
            )
        {
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        found.shadows = crate::guard::Shadows {
            dirs,
            names: python_modules.iter().cloned().collect(),
        };
    }
    found
}

/// The files of the tree that the test command runs or reads by name: a script named on its
/// command line, in package.json's test scripts, a Makefile's test recipe or its includes,
/// tox's commands. Changing one changes what runs the tests.
fn files_the_command_names(
    command: &TestCommand,
    paths: &[String],
    read: &dyn Fn(&str) -> Option<String>,
) -> Vec<String> {
    let lines = command_lines(command, read);
    let mut named: Vec<String> = lines
        .iter()
        .flat_map(|l| l.split(|c: char| c.is_whitespace() || "\"';&|()<>=`$".contains(c)))
        .map(|word| word.trim_start_matches("./"))
        .filter(|word| paths.iter().any(|p| p == word))
        .map(|word| format!("/{word}"))
        .collect();
    named.sort();
    named.dedup();
    named
}

/// Every command line that runs when the tests do: the test command, package.json's test
/// scripts, a Makefile's test recipe and includes, tox's commands.
fn command_lines(command: &TestCommand, read: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    if let TestCommand::Shell(line) = command {
        lines.push(line.clone());
    }
    if let Some(package) = read("package.json") {
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(&package) {
            for key in ["pretest", "test", "posttest"] {
                lines.extend(value["scripts"][key].as_str().map(String::from));
            }
        }
    }
    for makefile in MAKEFILES {
        if let Some(text) = read(makefile) {
            lines.push(make_recipe(&text, "test"));
            let includes = text.lines().filter_map(|l| {
                let mut words = l.split_whitespace();
                let first = words.next()?;
                ["include", "-include", "sinclude"]
                    .contains(&first)
                    .then(|| words.collect::<Vec<_>>().join(" "))
            });
            lines.extend(includes);
        }
    }
    if let Some(tox) = read("tox.ini") {
        lines.extend(ini_lines(&tox, "testenv", "commands").unwrap_or_default());
    }
    lines
}

/// The `python_files` patterns of the base's pytest configuration, wherever it is set.
/// What pytest collects beyond the defaults: its configured `python_files`, and the files its
/// doctest glob takes (`test*.txt` unless configured, in `doctest_glob` or `--doctest-glob`).
fn pytest_collects(read: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut globs = pytest_setting(read, "python_files");
    let options = pytest_setting(read, "addopts");
    let from_options: Vec<String> = options
        .iter()
        .enumerate()
        .filter_map(|(i, word)| match word.strip_prefix("--doctest-glob") {
            Some(rest) if rest.starts_with('=') => Some(rest[1..].to_string()),
            Some("") => options.get(i + 1).cloned(),
            _ => None,
        })
        .map(|g| g.trim_matches(['"', '\'']).to_string())
        .collect();
    let doctests = [pytest_setting(read, "doctest_glob"), from_options].concat();
    if doctests.is_empty() {
        globs.push("test*.txt".into());
    }
    globs.extend(doctests);
    globs
}

/// A pytest setting of the base, wherever it is set, as its words.
pub(super) fn pytest_setting(read: &dyn Fn(&str) -> Option<String>, key: &str) -> Vec<String> {
    let ini = |file: &str, section: &str| {
        let text = read(file)?;
        ini_value(&text, section, key)
    };
    let toml = || {
        let table: toml::Table = read("pyproject.toml")?.parse().ok()?;
        let pytest = table.get("tool")?.get("pytest")?;
        let value = pytest
            .get("ini_options")
            .and_then(|o| o.get(key))
            .or_else(|| pytest.get(key))?;
        Some(match value {
            toml::Value::Array(items) => items
                .iter()
                .filter_map(|i| i.as_str())
                .collect::<Vec<_>>()
                .join(" "),
            other => other.as_str()?.to_string(),
        })
    };
    let found = ini("pytest.ini", "pytest")
        .or_else(|| ini(".pytest.ini", "pytest"))
        .or_else(toml)
        .or_else(|| ini("tox.ini", "pytest"))
        .or_else(|| ini("setup.cfg", "tool:pytest"));
    found
        .map(|v| v.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}

/// A key's value in an INI section, its lines joined with spaces.
fn ini_value(text: &str, section: &str, key: &str) -> Option<String> {
    ini_lines(text, section, key).map(|lines| lines.join(" "))
}

/// A key's value in an INI section as its lines: the text after `=` (or `:`), if any, then
/// each indented continuation line; comments and blank lines left out. None when unset.
pub(super) fn ini_lines(text: &str, section: &str, key: &str) -> Option<Vec<String>> {
    let mut inside = false;
    let mut value: Option<Vec<String>> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(header) = trimmed.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            if value.is_some() {
                break;
            }
            inside = header.trim() == section;
            continue;
        }
        if !inside || trimmed.is_empty() || trimmed.starts_with(['#', ';']) {
            continue;
        }
        let continued = line.starts_with([' ', '\t']);
        match (&mut value, continued) {
            (Some(lines), true) => lines.push(trimmed.to_string()),
            (Some(_), false) => break,
            (None, _) => {
                if let Some((k, v)) = trimmed.split_once(['=', ':']) {
                    if k.trim() == key {
                        let first = v.trim();
                        value = Some(Vec::from_iter(
                            (!first.is_empty()).then(|| first.to_string()),
                        ));
                    }
                }
            }
        }
    }
    value
}

/// tox's `[testenv] commands` as one shell line with its `setenv`, None when it has none, or
/// why they cannot run outside tox: a substitution only tox can fill in, or a dependency of
/// its `deps` that `installed` says is missing.
fn tox_commands(text: &str, installed: &dyn Fn(&str) -> bool) -> Result<Option<String>, String> {
    let setenv: Vec<String> = ini_lines(text, "testenv", "setenv")
        .unwrap_or_default()
        .iter()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| Ok(format!("{}={}", k.trim(), tox_substituted(v.trim())?)))
        .collect::<Result<_, String>>()?;
    let mut lines: Vec<String> = Vec::new();
    // Continuation lines were joined with spaces; tox runs each original line on its own.
    for line in ini_lines(text, "testenv", "commands").unwrap_or_default() {
        // tox ignores the exit code of a command marked with a leading `-`.
        let ignored = line.trim_start().starts_with('-');
        let line = tox_substituted(line.trim().trim_start_matches('-').trim())?;
        if !line.trim().is_empty() {
            let env: String = setenv.iter().map(|kv| format!("{kv} ")).collect();
            let end = if ignored { " || true" } else { "" };
            lines.push(format!("{env}{}{end}", line.trim()));
        }
    }
    if lines.is_empty() {
        return Ok(None);
    }
    let missing: Vec<String> = ini_lines(text, "testenv", "deps")
        .unwrap_or_default()
        .iter()
        .filter(|d| !d.starts_with('-') && !d.starts_with('.') && !d.contains('{'))
        .filter_map(|d| {
            let end = d
                .find(|c: char| !(c.is_alphanumeric() || "._-".contains(c)))
                .unwrap_or(d.len());
            Some(d[..end].to_string()).filter(|n| !n.is_empty())
        })
        .filter(|name| !installed(name))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "tox.ini's commands need {} (its [testenv] deps), which the python3 here does not \
             have",
            missing.join(", ")
        ));
    }
    Ok(Some(lines.join(" && ")))
}

/// A tox command line with tox's substitutions filled in as a plain shell would have them:
/// `{envtmpdir}` is a folder under the run's own TMPDIR, `{posargs}` its default.
fn tox_substituted(line: &str) -> Result<String, String> {
    // A tool of the env's bin folder is the one on PATH.
    let line = line.replace("{envbindir}/", "");
    let line = line.as_str();
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..]
            .find('}')
            .map(|i| open + i)
            .ok_or_else(|| format!("tox.ini's commands have an unclosed `{{` in `{line}`"))?;
        let key = &rest[open + 1..close];
        let value = match key.split_once(':') {
            None => match key {
                "posargs" => String::new(),
                "envpython" => "python3".into(),
                "toxinidir" | "toxworkdir" => ".".into(),
                "envtmpdir" => "\"$TMPDIR/tox-envtmpdir\"".into(),
                "envname" => "py".into(),
                "/" => "/".into(),
                ":" => ":".into(),
                _ => {
                    return Err(format!(
                        "tox.ini's commands use `{{{key}}}`, which only tox can fill in"
                    ))
                }
            },
            Some(("posargs", default)) => default.to_string(),
            Some(("env", var)) => match var.split_once(':') {
                Some((name, default)) => format!("${{{name}:-{default}}}"),
                None => format!("${{{var}}}"),
            },
            Some(_) => {
                return Err(format!(
                    "tox.ini's commands use `{{{key}}}`, which only tox can fill in"
                ))
            }
        };
        out.push_str(&value);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn has_make_target(makefile: &str, target: &str) -> bool {
    makefile.lines().any(|line| {
        line.split_once(':').is_some_and(|(names, rest)| {
            !rest.starts_with('=') && names.split_whitespace().any(|n| n == target)
        }) && !line.starts_with(['\t', ' ', '#', '.'])
    })
}

/// The recipe lines of a make target, to guess which runner it calls.
fn make_recipe(makefile: &str, target: &str) -> String {
    let mut lines = makefile.lines().skip_while(|line| {
        !line
            .split_once(':')
            .is_some_and(|(names, _)| names.split_whitespace().any(|n| n == target))
    });
    let _header = lines.next();
    lines
        .take_while(|l| l.starts_with('\t'))
        .collect::<Vec<_>>()
        .join("\n")
}

fn npm_test_script(package_json: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(package_json).ok()?;
    let script = value["scripts"]["test"].as_str()?;
    (!script.contains("no test specified")).then(|| script.to_string())
}

pub(super) fn is_python_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py"))
}

/// A test module written for unittest: it subclasses TestCase (or builds a suite in
/// load_tests) and does not use pytest.
fn is_unittest_module(text: &str) -> bool {
    let uses_unittest = text.contains("unittest.TestCase")
        || text.contains("(TestCase)")
        || text.contains("def load_tests(");
    uses_unittest && !text.contains("import pytest") && !text.contains("from pytest")
}

impl TestResult {
    /// The runner said (or its names show) that it collected no tests at all.
    pub(super) fn runner_collected_nothing(&self) -> bool {
        let output = self.tail.as_str();
        let none_named = self.cases.as_ref().is_some_and(|c| c.is_empty());
        let zero = self
            .counts
            .is_some_and(|c| c.passed + c.failed + c.skipped == 0);
        none_named
            || zero
            || output.contains("no tests ran")
            || output.contains("collected 0 items")
            || output.contains("Ran 0 tests")
            || output.contains("NO TESTS RAN")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads a file's text from a list of (path, text), as a commit's tree would give it.
    fn reader<'a>(files: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            files
                .iter()
                .find(|(p, _)| *p == name)
                .map(|(_, t)| t.to_string())
        }
    }

    fn detect_in(files: &[(&str, &str)], pytest: bool) -> Option<Detected> {
        let paths: Vec<String> = files.iter().map(|(p, _)| p.to_string()).collect();
        let read = reader(files);
        let installed = |name: &str| name == "pytest" && pytest;
        detect(
            &paths,
            &read,
            &Python {
                pytest,
                installed: &installed,
            },
        )
    }

    fn shell(files: &[(&str, &str)], pytest: bool) -> Option<(String, Runner)> {
        detect_in(files, pytest).map(|d| match d.command {
            TestCommand::Shell(c) => (c, d.runner),
            other => (format!("{other:?}"), d.runner),
        })
    }

    #[test]
    fn detects_by_marker_files() {
        let cmd = |s: &str, r| Some((s.to_string(), r));
        assert_eq!(
            shell(&[("Cargo.toml", "")], false),
            cmd("cargo test --no-fail-fast", Runner::Cargo)
        );
        let workspace = "[package]\nname = \"a\"\n\n[workspace]\nmembers = [\"b\"]\n";
        assert_eq!(
            shell(&[("Cargo.toml", workspace)], false),
            cmd("cargo test --workspace --no-fail-fast", Runner::Cargo),
            "every member's tests are in the inventory"
        );
        assert_eq!(
            shell(&[("Cargo.toml", "[workspace]\nmembers = [\"b\"]\n")], false),
            cmd("cargo test --no-fail-fast", Runner::Cargo),
            "a virtual manifest tests every member already"
        );
        assert_eq!(
            shell(&[("go.mod", "")], false),
            cmd("go test -v ./...", Runner::Go)
        );
        assert_eq!(
            shell(
                &[("package.json", r#"{"scripts":{"test":"node --test"}}"#)],
                false
            ),
            cmd("npm test", Runner::Node)
        );
        assert_eq!(
            shell(&[("src/calc.py", ""), ("tests/test_calc.py", "")], true),
            cmd("python3 -m pytest -q", Runner::Pytest)
        );
        assert_eq!(
            detect_in(&[("calc_test.py", "def test_a(): pass")], false).map(|d| d.command),
            Some(TestCommand::BuiltinPython { unittest: false })
        );
    }

    #[test]
    fn the_projects_own_runner_comes_first() {
        let tox = "[tox]\nenvlist = py311\n\n[testenv]\ndeps = pytest\ncommands =\n    pytest {posargs} tests\n    - python -m doctest README.md\n";
        assert_eq!(
            shell(&[("tox.ini", tox), ("test_a.py", "")], true),
            Some((
                "pytest  tests && python -m doctest README.md || true".to_string(),
                Runner::Pytest
            ))
        );
        let make = "PY = python3\n\n.PHONY: test\ntest: build\n\t$(PY) -m unittest -v\n";
        assert_eq!(
            shell(&[("Makefile", make), ("Cargo.toml", "")], true),
            Some(("make test".to_string(), Runner::Unittest))
        );
        assert_eq!(
            shell(
                &[("Makefile", "build:\n\tcc x.c\n"), ("Cargo.toml", "")],
                true
            ),
            Some(("cargo test --no-fail-fast".to_string(), Runner::Cargo)),
            "a Makefile without a test target is no runner"
        );
        let nox = "import nox\n\n@nox.session\ndef tests(session):\n    session.run('pytest')\n";
        assert_eq!(
            shell(&[("noxfile.py", nox)], true),
            Some(("nox -s tests".to_string(), Runner::Other))
        );
    }

    #[test]
    fn unittest_projects_use_unittest_discovery_even_with_pytest_around() {
        let unit =
            "import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        pass\n";
        let files = [
            ("test_a.py", unit),
            ("tests/__init__.py", ""),
            ("tests/test_b.py", unit),
        ];
        let d = detect_in(&files, true).unwrap();
        assert_eq!(d.command, TestCommand::BuiltinPython { unittest: true });
        let mixed = detect_in(
            &[("test_a.py", unit), ("test_b.py", "import pytest\n")],
            true,
        );
        assert_eq!(
            mixed.map(|d| d.command),
            Some(TestCommand::Shell("python3 -m pytest -q".into()))
        );
    }

    #[test]
    fn test_files_unittest_discovery_would_not_find_need_another_runner() {
        let unit =
            "import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        pass\n";
        let files = [("test_add.py", unit), ("mul_test.py", unit)];
        let outside_packages = [("tests/test_add.py", unit)];
        assert_eq!(
            detect_in(&outside_packages, false).map(|d| d.command),
            Some(TestCommand::BuiltinPython { unittest: false })
        );
        let in_packages = [
            ("tests/__init__.py", ""),
            ("tests/unit/__init__.py", ""),
            ("tests/unit/test_add.py", unit),
        ];
        assert_eq!(
            detect_in(&in_packages, false).map(|d| d.command),
            Some(TestCommand::BuiltinPython { unittest: true })
        );
        assert_eq!(
            detect_in(&files, true).map(|d| d.command),
            Some(TestCommand::Shell("python3 -m pytest -q".into()))
        );
        assert_eq!(
            detect_in(&files, false).map(|d| d.command),
            Some(TestCommand::BuiltinPython { unittest: false })
        );
    }

    #[test]
    fn npm_placeholder_script_and_no_tests_detect_nothing() {
        let npm_init = r#"{"scripts":{"test":"echo \"Error: no test specified\" && exit 1"}}"#;
        assert_eq!(detect_in(&[("package.json", npm_init)], false), None);
        assert_eq!(detect_in(&[("README.md", ""), ("calc.py", "")], true), None);
    }

    #[test]
    fn files_the_test_command_names_and_modules_it_would_import_are_collected() {
        let files = [
            (
                "package.json",
                r#"{"scripts": {"test": "sh scripts/run-tests.sh && ./check.sh --all"}}"#,
            ),
            ("scripts/run-tests.sh", "exec node --test\n"),
            ("check.sh", ""),
            (
                "Makefile",
                "include config.env\n-include local.mk\ntest:\n\t$(PY) tools/runner.py\n",
            ),
            ("config.env", "PY = python3\n"),
            ("tools/runner.py", ""),
            ("test_calc.py", ""),
        ];
        let paths: Vec<String> = files.iter().map(|(p, _)| p.to_string()).collect();
        let read = reader(&files);
        let found = collected(
            Runner::Pytest,
            &TestCommand::Shell("python3 -m pytest -q".into()),
            &paths,
            &read,
            &["shlex".to_string()],
        );
        assert_eq!(
            found.protected,
            vec![
                "test*.txt",
                "/check.sh",
                "/config.env",
                "/scripts/run-tests.sh",
                "/tools/runner.py"
            ]
        );
        assert_eq!(found.shadows.dirs, vec![std::path::PathBuf::new()]);
        let nested = ["checks/unit/test_calc.py".to_string()];
        let config = |name: &str| {
            (name == "pytest.ini").then(|| "[pytest]\npythonpath = src lib/\n".to_string())
        };
        let deep = collected(
            Runner::Pytest,
            &TestCommand::Shell("pytest".into()),
            &nested,
            &config,
            &["json".to_string()],
        );
        let dirs: Vec<&str> = deep
            .shadows
            .dirs
            .iter()
            .map(|d| d.to_str().unwrap())
            .collect();
        assert_eq!(dirs, vec!["", "checks/unit", "checks", "src", "lib"]);
        assert!(found.shadows.names.contains("shlex"));
        let unittest = collected(
            Runner::BuiltinPython,
            &TestCommand::BuiltinPython { unittest: true },
            &[],
            &|_| None,
            &[],
        );
        assert_eq!(unittest.protected, vec!["test*.py"]);
        assert_eq!(unittest.no_new, vec!["__init__.py"]);
        let cargo_files = [("src/lib.rs", "#[cfg(test)]\nmod tests;\n")];
        let cargo_paths: Vec<String> = ["Cargo.toml", "src/lib.rs", "sub/Cargo.toml"]
            .map(String::from)
            .to_vec();
        let cargo_read = reader(&cargo_files);
        assert_eq!(
            collected(
                Runner::Cargo,
                &TestCommand::Shell("cargo test".into()),
                &cargo_paths,
                &cargo_read,
                &[]
            )
            .protected,
            vec![
                "benches/",
                "/src/tests.rs",
                "/src/tests/",
                "/target",
                "/sub/target"
            ]
        );
    }

    #[test]
    fn the_runner_collects_more_than_the_defaults() {
        let files = [
            (
                "pyproject.toml",
                "[tool.pytest.ini_options]\npython_files = [\"check_*.py\", \"*_checks.py\"]\n",
            ),
            ("setup.cfg", "[tool:pytest]\npython_files = ignored_*.py\n"),
        ];
        let read = reader(&files);
        let pytest = TestCommand::Shell("pytest".into());
        assert_eq!(
            collected(Runner::Pytest, &pytest, &[], &read, &[]).protected,
            vec!["check_*.py", "*_checks.py", "test*.txt"],
            "pytest's own doctest glob, unless configured"
        );
        let ini = |name: &str| {
            (name == "pytest.ini").then(|| {
                "[pytest]\npython_files =\n    t_*.py\n    *_t.py\naddopts = --doctest-glob='*.md' -q\n"
                    .into()
            })
        };
        assert_eq!(
            collected(Runner::Pytest, &pytest, &[], &ini, &[]).protected,
            vec!["t_*.py", "*_t.py", "*.md"]
        );
        let unittest = TestCommand::BuiltinPython { unittest: true };
        assert_eq!(
            collected(Runner::BuiltinPython, &unittest, &[], &read, &[]).protected,
            vec!["test*.py"]
        );
        let make = TestCommand::Shell("make test".into());
        assert_eq!(
            collected(Runner::Other, &make, &[], &read, &[]).protected,
            vec!["Makefile", "makefile", "GNUmakefile", "*.mk"]
        );
    }

    #[test]
    fn guesses_the_runner_from_the_command() {
        assert_eq!(guess_runner("python3 -m pytest -q"), Runner::Pytest);
        assert_eq!(guess_runner(".venv/bin/pytest tests"), Runner::Pytest);
        assert_eq!(guess_runner("pytest tests"), Runner::Pytest);
        assert_eq!(guess_runner("python -m unittest -v"), Runner::Unittest);
        assert_eq!(guess_runner("cargo test --workspace"), Runner::Cargo);
        assert_eq!(guess_runner("go test ./..."), Runner::Go);
        assert_eq!(guess_runner("node --test"), Runner::Node);
        assert_eq!(guess_runner("make check"), Runner::Other);
    }
}
