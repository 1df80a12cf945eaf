//! What the tree says about the environment its tests need, and whether a first test run
//! failed for want of it: a package under `src/` that only an install would put on the path,
//! a dependency declared but not installed, a runner or toolchain that is missing. Pure: the
//! files come from the base commit, the output from the run before any change.

use super::{Runner, Status, TestResult};
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
    /// The packages package.json declares (dependencies of every kind).
    pub node_declared: BTreeSet<String>,
    /// pytest's configured options (`addopts`), which change what it prints.
    pub pytest_addopts: Vec<String>,
}

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
        for path in paths.iter().filter(|p| {
            let name = p.rsplit('/').next().unwrap_or(p);
            name.starts_with("requirements") && name.ends_with(".txt")
        }) {
            let text = read(path).unwrap_or_default();
            facts
                .declared
                .extend(text.lines().filter_map(requirement_name));
        }
        facts.declared.extend(declared_python(read));
        facts.pytest_addopts = super::detect::pytest_setting(read, "addopts");
        if let Some(package) = read("package.json") {
            facts.node_declared = declared_node(&package);
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

/// The distribution a requirement line names (`requests>=2 ; python_version<"4"`), normalised
/// as package names are; None for comments, options and paths.
fn requirement_name(line: &str) -> Option<String> {
    let line = line.split('#').next()?.trim();
    if line.is_empty() || line.starts_with(['-', '.', '/']) || line.contains("://") {
        return None;
    }
    let end = line
        .find(|c: char| !(c.is_alphanumeric() || "._-".contains(c)))
        .unwrap_or(line.len());
    let name = &line[..end];
    (!name.is_empty()).then(|| name.to_lowercase().replace(['-', '.'], "_"))
}

/// What pyproject.toml, setup.cfg, setup.py and tox.ini declare as dependencies, but the
/// project itself.
fn declared_python(read: &dyn Fn(&str) -> Option<String>) -> BTreeSet<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut own: Option<String> = None;
    if let Some(table) = read("pyproject.toml").and_then(|t| t.parse::<toml::Table>().ok()) {
        let at = |path: &[&str]| {
            path.iter()
                .try_fold(&toml::Value::Table(table.clone()), |v, key| v.get(key))
                .cloned()
        };
        let strings = |v: Option<toml::Value>| -> Vec<String> {
            let mut found = Vec::new();
            let mut stack: Vec<toml::Value> = v.into_iter().collect();
            while let Some(value) = stack.pop() {
                match value {
                    toml::Value::String(s) => found.push(s),
                    toml::Value::Array(items) => stack.extend(items),
                    toml::Value::Table(t) => stack.extend(t.into_iter().map(|(_, v)| v)),
                    _ => {}
                }
            }
            found
        };
        lines.extend(strings(at(&["project", "dependencies"])));
        lines.extend(strings(at(&["project", "optional-dependencies"])));
        lines.extend(strings(at(&["dependency-groups"])));
        for poetry in [
            at(&["tool", "poetry", "dependencies"]),
            at(&["tool", "poetry", "dev-dependencies"]),
        ] {
            if let Some(toml::Value::Table(t)) = poetry {
                lines.extend(t.keys().filter(|k| *k != "python").cloned());
            }
        }
        if let Some(toml::Value::Table(groups)) = at(&["tool", "poetry", "group"]) {
            for group in groups.values() {
                if let Some(toml::Value::Table(t)) = group.get("dependencies") {
                    lines.extend(t.keys().cloned());
                }
            }
        }
        own = at(&["project", "name"])
            .or_else(|| at(&["tool", "poetry", "name"]))
            .and_then(|v| v.as_str().map(str::to_string));
    }
    if let Some(cfg) = read("setup.cfg") {
        for key in ["install_requires", "tests_require"] {
            lines.extend(super::detect::ini_lines(&cfg, "options", key).unwrap_or_default());
        }
        own = own.or_else(|| super::detect::ini_lines(&cfg, "metadata", "name")?.pop());
    }
    if let Some(tox) = read("tox.ini") {
        lines.extend(super::detect::ini_lines(&tox, "testenv", "deps").unwrap_or_default());
    }
    if let Some(setup) = read("setup.py") {
        lines.extend(setup_py_requirements(&setup));
    }
    let own = own.and_then(|o| requirement_name(&o));
    lines
        .iter()
        .filter_map(|l| requirement_name(l))
        .filter(|name| Some(name) != own.as_ref())
        .collect()
}

/// The quoted requirements of setup.py's `install_requires=[...]` and `tests_require=[...]`.
fn setup_py_requirements(text: &str) -> Vec<String> {
    ["install_requires", "tests_require"]
        .iter()
        .filter_map(|key| text.split_once(key))
        .filter_map(|(_, rest)| rest.split_once('[').map(|(_, list)| list))
        .filter_map(|list| list.split_once(']').map(|(items, _)| items))
        .flat_map(|items| {
            items
                .split(',')
                .map(|i| i.trim().trim_matches(['"', '\'']).to_string())
        })
        .filter(|item| !item.is_empty())
        .collect()
}

/// The packages package.json declares: dependencies of every kind.
fn declared_node(package_json: &str) -> BTreeSet<String> {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(package_json) else {
        return BTreeSet::new();
    };
    [
        "dependencies",
        "devDependencies",
        "peerDependencies",
        "optionalDependencies",
    ]
    .iter()
    .filter_map(|kind| value[kind].as_object())
    .flat_map(|deps| deps.keys().cloned())
    .collect()
}

/// How the built-in runner says it found a test only pytest can run (it exits 5, no verdict).
const NEEDS_PYTEST: &str = "agent-git-runner: needs pytest: ";

struct Signs {
    missing_module: Regex,
    node_missing: Regex,
    host: Regex,
    file_line: Regex,
    missing_script: Regex,
    cargo_offline: Regex,
}

/// Compiles the patterns now, so that their first use does not wait for them.
pub(super) fn warm_up() {
    let _ = signs();
}

fn signs() -> &'static Signs {
    static SIGNS: OnceLock<Signs> = OnceLock::new();
    SIGNS.get_or_init(|| {
        let re = |p: &str| Regex::new(p).unwrap_or_else(|e| panic!("bad built-in regex {p}: {e}"));
        Signs {
            missing_module: re(r#"No module named '?([A-Za-z_][A-Za-z0-9_.]*[A-Za-z0-9_])"#),
            node_missing: re(r#"Cannot find (?:module|package) '([^']+)'"#),
            // getaddrinfo's codes are ASCII (`ENOTFOUND`): a Unicode `\w` class here took 1 MiB
            // of memory.
            host: re(concat!(
                r#"host='([^']+)'|Failed to resolve '([^']+)'|getaddrinfo (?-u:\w)+ ([^\s:'"]+)"#,
                r#"|Could not resolve host: ([^\s'"]+)|lookup ([^\s:]+)"#
            )),
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
/// `protected` says which files the model may not change.
pub fn cannot_run(
    result: &TestResult,
    facts: &TreeFacts,
    protected: &dyn Fn(&str) -> bool,
) -> Option<String> {
    classify(result, facts, protected).map(Stop::why)
}

/// Why the tests cannot be run here, for whoever tests a commit rather than changes it (the
/// pre-push check): the environment's reasons only. A test file that does not compile is the
/// commit's own failure there.
pub fn cannot_run_here(result: &TestResult, facts: &TreeFacts) -> Option<String> {
    match classify(result, facts, &|_| false)? {
        Stop::Environment(why) => Some(why),
        Stop::TestFiles(_) => None,
    }
}

/// Why a first test run cannot lead anywhere.
enum Stop {
    /// The machine lacks something: a runner, a toolchain, a dependency, a network.
    Environment(String),
    /// The committed test files themselves are broken, and the model may not change them.
    TestFiles(String),
}

impl Stop {
    fn why(self) -> String {
        match self {
            Stop::Environment(why) | Stop::TestFiles(why) => why,
        }
    }
}

fn classify(
    result: &TestResult,
    facts: &TreeFacts,
    protected: &dyn Fn(&str) -> bool,
) -> Option<Stop> {
    if !result.ran {
        let why = format!("the test command could not start: {}", result.tail);
        return Some(Stop::Environment(why));
    }
    if let Some(why) = protected_syntax_error(&result.tail, protected) {
        return Some(Stop::TestFiles(why));
    }
    environment(result, facts).map(Stop::Environment)
}

/// What the environment lacks, going by the first test run's output.
fn environment(result: &TestResult, facts: &TreeFacts) -> Option<String> {
    let output = result.tail.as_str();
    let said = |needle: &str| output.contains(needle);
    let s = signs();
    let runs_pytest = result.runner == Runner::Pytest;
    let pytest_missing = missing_modules(output).any(|m| m == "pytest");
    if runs_pytest && pytest_missing {
        return Some(
            "No module named pytest: pytest is not installed for the python3 the tests run \
             with. Install it there (`python3 -m pip install pytest`, or in the project's venv), \
             or set a command that does not need it with `git config agent-git.testCmd CMD`"
                .to_string(),
        );
    }
    let fixed = |why: &str| {
        Some(format!(
            "{why}; set the command with `git config agent-git.testCmd CMD`"
        ))
    };
    if let Some(why) = node_modules_missing(result, facts) {
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
    let script = missing_script(result);
    match result.exit_code {
        Some(126) => return fixed("the test command is not executable (exit 126)"),
        Some(127) if script.is_none() => {
            if let Some(line) = command_not_found(result) {
                return fixed(&format!(
                    "the test command was not found (exit 127): {line}"
                ));
            }
        }
        Some(125) if said("agent-git sandbox:") => {
            return Some("the sandbox could not start the test command".to_string())
        }
        _ => {}
    }
    if let Some(script) = script {
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
    if let Some(target) = missing_make_target(result) {
        return fixed(&format!("the Makefile has no target `{target}`"));
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

/// The modules the output says could not be found, dotted names whole.
fn missing_modules(output: &str) -> impl Iterator<Item = String> + '_ {
    signs()
        .missing_module
        .captures_iter(output)
        .map(|c| c[1].to_string())
}

/// The shell's line saying that a program is not on PATH: a word of the test command itself,
/// or any bare name (the model cannot install programs); a path (`./tools/check`) that a
/// script the command runs cannot find is the code's to write.
fn command_not_found(result: &TestResult) -> Option<String> {
    result
        .tail
        .lines()
        .find(|line| {
            let missing = line
                .strip_suffix(": not found")
                .or_else(|| line.strip_suffix(": command not found"))
                .and_then(|l| l.rsplit(": ").next());
            missing.is_some_and(|tool| !tool.contains('/') || in_command(result, tool))
        })
        .map(|line| line.trim().to_string())
}

/// Whether `path` is, by its file name, a word of the test command (`sh ../x.sh`: `x.sh`).
fn in_command(result: &TestResult, path: &str) -> bool {
    let base = |path: &str| path.rsplit('/').next().unwrap_or(path).to_string();
    result
        .command
        .split_whitespace()
        .any(|word| base(word.trim_matches(['"', '\''])) == base(path))
}

/// The script the test command names that the tree does not have: a shell or python3 could
/// not open a file that is a word of the command (a test that runs a script still to be
/// written is the model's).
fn missing_script(result: &TestResult) -> Option<String> {
    signs()
        .missing_script
        .captures_iter(&result.tail)
        .filter_map(|c| {
            (1..=3)
                .find_map(|i| c.get(i))
                .map(|m| m.as_str().to_string())
        })
        .find(|script| in_command(result, script))
}

/// The target make says it has no rule for, when it is one the test command asks for (a
/// missing file a target needs is the model's to write).
fn missing_make_target(result: &TestResult) -> Option<String> {
    let words: Vec<&str> = result.command.split_whitespace().collect();
    result.tail.lines().find_map(|line| {
        let rest = line.split_once("No rule to make target ")?.1;
        let target = rest
            .trim_start_matches(['\'', '`'])
            .split(['\'', '`'])
            .next()?;
        let asked = words.contains(&target) || (target == "test" && words.contains(&"make"));
        (asked && !rest.contains("needed by")).then(|| target.to_string())
    })
}

/// A node test command whose tools or packages come from `node_modules`, which the tree
/// does not have: a tool of the command, or a package package.json declares, not found (a
/// relative module, or one nobody declares, is the code's to fix).
fn node_modules_missing(result: &TestResult, facts: &TreeFacts) -> Option<String> {
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
    let package = signs()
        .node_missing
        .captures_iter(output)
        .map(|c| c[1].to_string())
        .find(|m| !m.starts_with(['.', '/']) && facts.node_declared.contains(package_of(m)));
    let what = match (tool, package) {
        (Some(tool), _) => format!("`{tool}`"),
        (None, Some(package)) => format!("the package `{package}`"),
        (None, None) => return None,
    };
    Some(format!(
        "the tests need {what}, which is not installed: {}. Install the project's packages in \
         your checkout (`npm ci`), or give agent-git `--setup-cmd \"npm ci --offline\"`",
        first_line(output)
    ))
}

/// The package of a module path: `lodash` of `lodash/fp`, `@scope/pkg` of `@scope/pkg/x`.
fn package_of(module: &str) -> &str {
    let parts = if module.starts_with('@') { 2 } else { 1 };
    let end = module
        .match_indices('/')
        .nth(parts - 1)
        .map_or(module.len(), |(i, _)| i);
    &module[..end]
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

/// Whether a failure's text says it tried to reach a host outside: a public name that could
/// not be resolved, or a network that cannot be reached. A name with no dot, or a local one,
/// is a typo or a test host the code is the model's to fix.
fn reached_out(text: &str) -> bool {
    if text.contains("Network is unreachable") {
        return true;
    }
    if !NO_NETWORK.iter().any(|sign| text.contains(sign)) {
        return false;
    }
    let local = [
        ".local",
        ".localhost",
        ".test",
        ".invalid",
        ".example",
        ".internal",
    ];
    signs()
        .host
        .captures_iter(text)
        .filter_map(|c| (1..=5).find_map(|i| c.get(i)).map(|m| m.as_str()))
        .any(|host| {
            let host = host.trim_end_matches(['.', ',', ')']);
            host.contains('.')
                && !local.iter().any(|l| host.ends_with(l))
                && !host.chars().all(|c| c.is_ascii_digit() || c == '.')
        })
}

/// Failing tests that reached for the network: no test run here has one, so no change can
/// make them pass, and a run held to every test could never end `passed`.
fn needs_network(result: &TestResult) -> Option<String> {
    let names: Vec<&str> = result
        .failing
        .iter()
        .filter(|f| f.detail.as_deref().is_some_and(reached_out))
        .map(|f| f.name.as_str())
        .collect();
    let which = match names.as_slice() {
        [] => return None,
        [one] => format!("{one} needs"),
        many => format!("{} tests need", many.len()),
    };
    let deselect = match result.runner {
        Runner::Pytest => format!(
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
fn protected_syntax_error(output: &str, protected: &dyn Fn(&str) -> bool) -> Option<String> {
    let lines: Vec<&str> = output.lines().collect();
    let compile_error = |l: &&str| {
        ["SyntaxError", "IndentationError", "TabError"]
            .iter()
            .any(|e| l.contains(e))
    };
    for (i, error) in lines.iter().enumerate().filter(|(_, l)| compile_error(l)) {
        // The file that does not compile is the last one the traceback named before the error.
        let Some(path) = lines[..i]
            .iter()
            .rev()
            .take(8)
            .find_map(|l| signs().file_line.captures(l).map(|c| c[1].to_string()))
        else {
            continue;
        };
        let name = path.rsplit('/').next().unwrap_or(&path);
        let test_file = super::detect::is_python_test_file(name) || name == "conftest.py";
        if test_file || protected(path.trim_start_matches("./")) {
            return Some(format!(
                "{}, in {path}: a protected file, which agent-git never lets the model change, does \
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
    let module = missing_modules(&result.tail).next()?;
    let first = first_line_with(&result.tail, "No module named").unwrap_or_default();
    let first = first.trim_start_matches("E ").trim();
    let top = module.split('.').next().unwrap_or(&module);
    let dotted = top != module;
    // Python names the first part it cannot find: a missing `a.b` means `a` is there, and the
    // module the code asks of it (the project's or a dependency's) is the code's to fix.
    if dotted {
        return None;
    }
    let why = match facts.python_modules.get(top).map(String::as_str) {
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
        None if declares(&facts.declared, top) => format!(
            "`{top}` is a dependency the project declares, and it is not installed for the \
             python3 the tests run with (the tests have no network). Install the project's \
             dependencies (`pip install -e .` or `pip install -r requirements.txt`) in it, or \
             activate the venv that has them, then run agent-git again"
        ),
        None if top == "pytest" && imported_by_a_test_file(&result.tail, top) => {
            "the test files import pytest, which is not installed for the python3 the tests run \
             with. Install it there (`python3 -m pip install pytest`, or in the project's venv)"
                .to_string()
        }
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

/// Whether the distributions `declared` include the one that installs module `module`: the
/// same name, one that holds it as a word or after `py` (`python_dateutil` for `dateutil`,
/// `pyyaml` for `yaml`), or one
/// of the few well-known ones whose names share nothing with their modules.
fn declares(declared: &BTreeSet<String>, module: &str) -> bool {
    const OTHER_NAMES: [(&str, &str); 8] = [
        ("pil", "pillow"),
        ("sklearn", "scikit_learn"),
        ("bs4", "beautifulsoup4"),
        ("cv2", "opencv_python"),
        ("crypto", "pycryptodome"),
        ("attr", "attrs"),
        ("mysqldb", "mysqlclient"),
        ("git", "gitpython"),
    ];
    let module = module.to_lowercase();
    declared.iter().any(|dist| {
        *dist == module
            || dist.split('_').any(|part| part == module)
            || *dist == format!("py{module}")
            || OTHER_NAMES
                .iter()
                .any(|(m, d)| *m == module && dist.starts_with(d))
    })
}

/// Whether a traceback in `output` shows a test file (or conftest.py) importing `module`.
fn imported_by_a_test_file(output: &str, module: &str) -> bool {
    let lines: Vec<&str> = output.lines().collect();
    lines.windows(2).any(|pair| {
        let Some(c) = signs().file_line.captures(pair[0]) else {
            return false;
        };
        let name = c[1].rsplit('/').next().unwrap_or(&c[1]).to_string();
        let test_file = super::detect::is_python_test_file(&name) || name == "conftest.py";
        let line = pair[1].trim();
        test_file
            && (line.starts_with(&format!("import {module}"))
                || line.starts_with(&format!("from {module}")))
    })
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

    /// The classification where nothing is protected but the test files.
    fn cannot_run(result: &TestResult, facts: &TreeFacts) -> Option<String> {
        super::cannot_run(result, facts, &|_| false)
    }

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
                "[project]\nname = \"Flask\"\ndependencies = [\n    \"Werkzeug>=3.1.0\",\n]\n",
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
    fn what_the_code_can_fix_is_no_stop_whatever_error_it_prints() {
        let unit_errors = |module: &str, file: &str, import: &str| {
            format!(
                "E\n======\nERROR: tests.test_a (unittest.loader._FailedTest.tests.test_a)\n\
                 ------\nImportError: Failed to import test module: tests.test_a\n\
                 Traceback (most recent call last):\n  File \"{file}\", line 1, in <module>\n    \
                 {import}\nModuleNotFoundError: No module named '{module}'\n\n------\n\
                 Ran 1 test in 0.001s\n\nFAILED (errors=1)\n"
            )
        };
        let own_project = facts(&[("pyproject.toml", "[project]\nname = \"calc\"\n")]);
        let package = facts(&[("calc/__init__.py", "")]);
        let none = TreeFacts::default();
        let cases: Vec<(&str, String, i32, &TreeFacts)> = vec![
            (
                "npm test",
                "Error: Cannot find module '../lib/calc'\nRequire stack:\n- test/calc.test.js\n".into(),
                1,
                &none,
            ),
            ("python3 -m unittest", unit_errors("calc", "tests/test_a.py", "import calc"), 1, &own_project),
            ("python3 -m unittest", unit_errors("calc.ops", "tests/test_a.py", "from calc.ops import x"), 1, &package),
            (
                "make test",
                "make: *** No rule to make target 'calc.c', needed by 'calc'.  Stop.\n".into(),
                2,
                &none,
            ),
            ("python3 -m unittest", unit_errors("pytest", "calc.py", "import pytest"), 1, &none),
            (
                "python3 -m unittest",
                "F\nFAIL: test_cli (test_cli.T.test_cli)\n----\nAssertionError: 2 != 0 : python3: can't open file 'cli.py': [Errno 2] No such file or directory\n\n----\nRan 1 test in 0.01s\n\nFAILED (failures=1)\n".into(),
                1,
                &none,
            ),
            (
                "python3 -m pytest -q",
                "FAILED test_client.py::test_get - urllib.error.URLError: <urlopen error [Errno -2] Name or service not known> host='locahost'\n1 failed in 0.1s\n".into(),
                1,
                &none,
            ),
        ];
        for (command, output, code, tree) in cases {
            let result = first_run(command, &output, code);
            assert_eq!(cannot_run(&result, tree), None, "{command}: {output}");
        }
    }

    #[test]
    fn errors_in_the_code_a_test_imports_or_in_what_a_script_runs_go_on() {
        let syntax_in_code = "F\nFAIL: test_calc (unittest.loader._FailedTest.test_calc)\n----\n\
            Traceback (most recent call last):\n  File \"test_calc.py\", line 1, in <module>\n    \
            from calc import add\n  File \"calc.py\", line 3\n    return a -\n              ^\n\
            SyntaxError: invalid syntax\n\n----\nRan 1 test in 0.0s\n\nFAILED (errors=1)\n";
        let declared = facts(&[("requirements.txt", "packaging\nPyYAML>=6\n")]);
        let typo =
            "E\nERROR: t (unittest.loader._FailedTest.t)\n----\nModuleNotFoundError: No module \
            named 'packaging.versionz'\n\n----\nRan 1 test in 0.0s\n\nFAILED (errors=1)\n";
        let go_on = [
            ("python3 -m unittest", syntax_in_code.to_string(), 1),
            ("python3 -m unittest", typo.to_string(), 1),
            (
                "sh run_tests.sh",
                "..\nrun_tests.sh: 3: ./tools/check: not found\n".into(),
                127,
            ),
        ];
        for (command, output, code) in go_on {
            let result = first_run(command, &output, code);
            assert_eq!(cannot_run(&result, &declared), None, "{command}: {output}");
        }
        let tool = first_run(
            "sh run_tests.sh",
            "run_tests.sh: 3: pytest: not found\n",
            127,
        );
        assert!(cannot_run(&tool, &declared).is_some_and(|w| w.contains("pytest: not found")));
        let yaml = typo.replace("packaging.versionz", "yaml");
        let result = first_run("python3 -m unittest", &yaml, 1);
        let why = cannot_run(&result, &declared).expect("PyYAML is declared, yaml is its module");
        assert!(
            why.contains("`yaml` is a dependency the project declares"),
            "{why}"
        );
    }

    #[test]
    fn a_protected_helper_that_does_not_compile_cannot_run() {
        let output = "E\nERROR: tests.test_a (unittest.loader._FailedTest.tests.test_a)\n----\n\
            Traceback (most recent call last):\n  File \"tests/test_a.py\", line 1, in <module>\n    \
            from tests.helpers import pair\n  File \"tests/helpers.py\", line 2\n    def pair(:\n\
            SyntaxError: invalid syntax\n\n----\nRan 1 test in 0.0s\n\nFAILED (errors=1)\n";
        let result = first_run("python3 -m unittest", output, 1);
        assert_eq!(
            cannot_run(&result, &TreeFacts::default()),
            None,
            "not protected: code"
        );
        let protected = |path: &str| path == "tests/helpers.py";
        let why = super::cannot_run(&result, &TreeFacts::default(), &protected)
            .expect("a protected helper");
        assert!(
            why.contains("in tests/helpers.py: a protected file"),
            "{why}"
        );
    }

    #[test]
    fn a_test_file_that_does_not_compile_is_the_commits_failure_for_a_check() {
        let output = "E     File \"test_calc.py\", line 3\nE   SyntaxError: invalid syntax\n1 error in 0.05s\n";
        let result = first_run("python3 -m pytest -q", output, 2);
        assert!(cannot_run(&result, &TreeFacts::default()).is_some());
        assert_eq!(cannot_run_here(&result, &TreeFacts::default()), None);
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
            why.starts_with(
                "SyntaxError: '(' was never closed, in tests/test_calc.py: a protected"
            ),
            "{why}"
        );
        let in_code = in_test.replace("File \"tests/test_calc.py\"", "File \"calc.py\"");
        let result = first_run("python3 -m pytest -q", &in_code, 2);
        assert_eq!(cannot_run(&result, &TreeFacts::default()), None);
    }
}
