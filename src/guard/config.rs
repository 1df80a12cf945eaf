//! Files that hold more than test configuration (`pyproject.toml`, `setup.cfg`,
//! `package.json`, `Cargo.toml`): the agent may change them, but not their test sections. A
//! change is compared section by section, as the runner reads them; any other part is free.

use super::source;
use std::path::Path;

/// The sections of a shared file that configure how tests are collected and run.
fn sections_of(file_name: &str) -> Option<Kind> {
    match file_name {
        "pyproject.toml" => Some(Kind::Toml(&[
            &["tool", "pytest"],
            &["tool", "tox"],
            &["tool", "hatch", "envs"],
        ])),
        "Cargo.toml" => Some(Kind::Toml(&[
            &["test"],
            &["bench"],
            // A target with `harness = false` prints what it likes; members change what runs.
            &["bin"],
            &["example"],
            &["workspace"],
            // What the tests are built against: their own dependencies, and any crate swapped.
            &["dev-dependencies"],
            &["dev_dependencies"],
            &["patch"],
            &["replace"],
            &["target"],
            &["lib", "test"],
            &["lib", "doctest"],
            &["lib", "harness"],
            &["package", "autotests"],
            &["package", "autobenches"],
            &["profile"],
        ])),
        "setup.cfg" => Some(Kind::Ini(&["tool:pytest", "tox:tox", "testenv"])),
        "package.json" => Some(Kind::Json(&[
            &["scripts", "test"],
            &["scripts", "pretest"],
            &["scripts", "posttest"],
            &["jest"],
            &["mocha"],
            &["devDependencies"],
            &["overrides"],
            &["resolutions"],
            &["pnpm"],
        ])),
        "go.mod" => Some(Kind::GoMod),
        _ => None,
    }
}

enum Kind {
    Toml(&'static [&'static [&'static str]]),
    Ini(&'static [&'static str]),
    Json(&'static [&'static [&'static str]]),
    /// go.mod's `replace` directives: a module swapped for another.
    GoMod,
}

/// Names the test sections that differ between two versions of `path` (None when `path` is
/// not such a file, or its test sections are the same). A version that no longer parses
/// counts as a change, since the runner would read it differently.
pub fn changed_test_sections(
    path: &Path,
    old: Option<&[u8]>,
    new: Option<&[u8]>,
) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    if name.ends_with(".rs") || name.ends_with(".py") {
        return changed_inline_tests(path, old, new);
    }
    let kind = sections_of(name)?;
    let read = |bytes: Option<&[u8]>| -> Result<Vec<Option<String>>, ()> {
        let Some(bytes) = bytes else {
            return Ok(vec![None; kind.len()]);
        };
        let text = std::str::from_utf8(bytes).map_err(|_| ())?;
        kind.extract(text)
    };
    let (before, after) = (read(old), read(new));
    // A file that does not parse either way is still read by something: then any change is
    // a change of its test sections.
    if before == after && (before.is_ok() || old == new) {
        return None;
    }
    let names = kind.names();
    let changed: Vec<&str> = match (&before, &after) {
        (Ok(b), Ok(a)) => names
            .iter()
            .zip(b.iter().zip(a))
            .filter(|(_, (x, y))| x != y)
            .map(|(n, _)| n.as_str())
            .collect(),
        _ => return Some(format!("{} (it no longer parses)", path.display())),
    };
    Some(format!("{} [{}]", path.display(), changed.join(", ")))
}

/// Names a source file whose tests inside it (Rust's test items and doc tests, Python's
/// doctests) differ between two versions.
fn changed_inline_tests(path: &Path, old: Option<&[u8]>, new: Option<&[u8]>) -> Option<String> {
    let text = |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
    let (old, new) = (text(old), text(new));
    let (same, what) = if path.extension().is_some_and(|e| e == "rs") {
        let same = match (source::rust_tests(&old), source::rust_tests(&new)) {
            (Some(a), Some(b)) => a == b,
            _ => source::rust_tests_by_text(&old) == source::rust_tests_by_text(&new),
        };
        (
            same,
            "its tests: #[cfg(test)] items, #[test] functions, doc tests",
        )
    } else {
        let same = source::python_doctests(&old) == source::python_doctests(&new)
            && source::python_load_tests(&old) == source::python_load_tests(&new);
        (same, "its doctests and load_tests")
    };
    (!same).then(|| format!("{} [{what}]", path.display()))
}

impl Kind {
    fn len(&self) -> usize {
        match self {
            Kind::Toml(keys) | Kind::Json(keys) => keys.len(),
            Kind::Ini(sections) => sections.len(),
            Kind::GoMod => 1,
        }
    }

    fn names(&self) -> Vec<String> {
        match self {
            Kind::Toml(keys) | Kind::Json(keys) => keys.iter().map(|k| k.join(".")).collect(),
            Kind::Ini(sections) => sections.iter().map(|s| s.to_string()).collect(),
            Kind::GoMod => vec!["replace".to_string()],
        }
    }

    /// Each section's content in a canonical form (None when absent).
    fn extract(&self, text: &str) -> Result<Vec<Option<String>>, ()> {
        match self {
            Kind::Toml(keys) => {
                let table: toml::Table = text.parse().map_err(|_| ())?;
                let root = toml::Value::Table(table);
                Ok(keys
                    .iter()
                    .map(|key| lookup_toml(&root, key).map(|v| format!("{v:?}")))
                    .collect())
            }
            Kind::Json(keys) => {
                let root: serde_json::Value = serde_json::from_str(text).map_err(|_| ())?;
                Ok(keys
                    .iter()
                    .map(|key| {
                        key.iter()
                            .try_fold(&root, |v, k| v.get(k))
                            .map(|v| v.to_string())
                    })
                    .collect())
            }
            Kind::Ini(sections) => Ok(sections.iter().map(|s| ini_section(text, s)).collect()),
            Kind::GoMod => Ok(vec![go_replaces(text)]),
        }
    }
}

/// go.mod's `replace` directives, one per line, whether single or in a `replace ( ... )` block.
fn go_replaces(text: &str) -> Option<String> {
    let mut found = String::new();
    let mut block = false;
    for line in text
        .lines()
        .map(|l| l.split("//").next().unwrap_or("").trim())
    {
        if block {
            if line == ")" {
                block = false;
            } else if !line.is_empty() {
                found.push_str(&format!("{line}\n"));
            }
        } else if let Some(rest) = line.strip_prefix("replace") {
            match rest.trim() {
                "(" => block = true,
                single => found.push_str(&format!("{single}\n")),
            }
        }
    }
    (!found.is_empty()).then_some(found)
}

fn lookup_toml<'a>(root: &'a toml::Value, key: &[&str]) -> Option<&'a toml::Value> {
    key.iter().try_fold(root, |v, k| v.get(k))
}

/// The lines of every INI section named `name` (or `name:...`, as tox's `testenv:py311`),
/// comments and blank lines dropped, read as pytest's iniconfig reads them: a byte-order mark
/// skipped, lines ended by `\n`, `\r\n` or a lone `\r`, a comment after a section header
/// ignored; names compared without regard to case (stricter than the readers).
fn ini_section(text: &str, name: &str) -> Option<String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut found: Option<String> = None;
    let mut inside = false;
    // Python's str.splitlines(), which iniconfig uses, ends a line at each of these.
    let breaks = [
        '\n', '\r', '\x0b', '\x0c', '\x1c', '\x1d', '\x1e', '\u{85}', '\u{2028}', '\u{2029}',
    ];
    for line in text.split(breaks) {
        let trimmed = line.trim();
        if let Some(header) = ini_header(trimmed) {
            inside = header == name || header.starts_with(&format!("{name}:"));
            if inside {
                found
                    .get_or_insert_with(String::new)
                    .push_str(&format!("[{header}]\n"));
            }
            continue;
        }
        if inside && !trimmed.is_empty() && !trimmed.starts_with(['#', ';']) {
            let section = found.get_or_insert_with(String::new);
            section.push_str(line.trim_end());
            section.push('\n');
        }
    }
    found
}

/// The name of a section header line (`[tool:pytest]  # options`), lower-cased.
fn ini_header(line: &str) -> Option<String> {
    if !line.starts_with('[') {
        return None;
    }
    let real = line.split(['#', ';']).next().unwrap_or("").trim();
    let name = real.strip_prefix('[')?.strip_suffix(']')?;
    Some(name.trim().to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(path: &str, old: Option<&str>, new: Option<&str>) -> Option<String> {
        changed_test_sections(
            Path::new(path),
            old.map(str::as_bytes),
            new.map(str::as_bytes),
        )
    }

    #[test]
    fn pyproject_test_sections_are_locked_and_the_rest_is_free() {
        let base = "[project]\nname = \"calc\"\nversion = \"1.0\"\n\n[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n";
        let bumped = base.replace("1.0", "1.1");
        assert_eq!(change("pyproject.toml", Some(base), Some(&bumped)), None);
        let deselect = format!("{base}addopts = \"-k 'not test_add'\"\n");
        assert_eq!(
            change("pyproject.toml", Some(base), Some(&deselect)),
            Some("pyproject.toml [tool.pytest]".into())
        );
        // Dotted keys at the top level are the same table to the runner.
        let dotted = "tool.pytest.ini_options.addopts = \"-x\"\n[project]\nname = \"calc\"\n";
        assert_eq!(
            change("sub/pyproject.toml", None, Some(dotted)),
            Some("sub/pyproject.toml [tool.pytest]".into())
        );
        assert_eq!(
            change("pyproject.toml", None, Some("[project]\nname = \"x\"\n")),
            None,
            "a new pyproject.toml without test sections is fine"
        );
        assert_eq!(
            change(
                "pyproject.toml",
                Some(base),
                Some("[tool.pytest.ini_options\n")
            ),
            Some("pyproject.toml (it no longer parses)".into())
        );
    }

    #[test]
    fn setup_cfg_package_json_and_cargo_toml() {
        let cfg = "[metadata]\nname = calc\n\n[tool:pytest]\ntestpaths = tests\n";
        let more = cfg.replace(
            "testpaths = tests",
            "testpaths = tests\naddopts = -k nothing",
        );
        assert_eq!(
            change("setup.cfg", Some(cfg), Some(&more)),
            Some("setup.cfg [tool:pytest]".into())
        );
        let renamed = cfg.replace("name = calc", "name = calculator");
        assert_eq!(change("setup.cfg", Some(cfg), Some(&renamed)), None);
        // Headers as iniconfig reads them: a trailing comment, a byte-order mark, lone `\r`.
        let plugged = "[metadata]\nname = calc\n\n[tool:pytest] # options\naddopts = -p flip\n";
        let bom = "\u{feff}[tool:pytest]\naddopts = -p flip\n";
        let cr = "[metadata]\rname = calc\r[tool:pytest]\raddopts = -p flip\r";
        let form_feed = "[metadata]\nname = calc\u{c}[tool:pytest]\u{c}addopts = -p calc\n";
        for sneaky in [plugged, bom, cr, form_feed] {
            assert_eq!(
                change("setup.cfg", None, Some(sneaky)),
                Some("setup.cfg [tool:pytest]".into()),
                "{sneaky:?}"
            );
        }
        let pkg = r#"{"name": "calc", "scripts": {"test": "node --test", "lint": "x"}}"#;
        let lint = r#"{"name": "calc", "scripts": {"test": "node --test", "lint": "y"}}"#;
        let cheat = r#"{"name": "calc", "scripts": {"test": "exit 0", "lint": "x"}}"#;
        // npm reads a package.json with a byte-order mark; serde does not: any change counts.
        let bom = format!("\u{feff}{pkg}");
        let bom_cheat = format!("\u{feff}{cheat}");
        assert_eq!(change("package.json", Some(&bom), Some(&bom)), None);
        assert!(change("package.json", Some(&bom), Some(&bom_cheat)).is_some());
        assert_eq!(change("package.json", Some(pkg), Some(lint)), None);
        assert_eq!(
            change("package.json", Some(pkg), Some(cheat)),
            Some("package.json [scripts.test]".into())
        );
        let cargo = "[package]\nname = \"calc\"\nversion = \"0.1.0\"\n";
        let no_overflow = format!("{cargo}\n[profile.dev]\noverflow-checks = false\n");
        assert_eq!(
            change("Cargo.toml", Some(cargo), Some(&no_overflow)),
            Some("Cargo.toml [profile]".into())
        );
        assert_eq!(change("calc.py", Some("a"), Some("b")), None);
        let patched =
            format!("{cargo}\n[patch.crates-io]\nassert-json-diff = {{ path = \"vendor/a\" }}\n");
        assert_eq!(
            change("Cargo.toml", Some(cargo), Some(&patched)),
            Some("Cargo.toml [patch]".into())
        );
        let module = "module example.com/calc\n\ngo 1.22\n";
        let replaced = format!("{module}\nreplace (\n\texample.com/assert => ./fake\n)\n");
        assert_eq!(
            change("go.mod", Some(module), Some(&replaced)),
            Some("go.mod [replace]".into())
        );
        assert_eq!(
            change(
                "go.mod",
                Some(module),
                Some(&module.replace("1.22", "1.23"))
            ),
            None
        );
        let hook = "def load_tests(loader, tests, pattern):\n    return loader.suiteClass()\n";
        assert_eq!(
            change("pkg/__init__.py", Some("VERSION = 1\n"), Some(hook)),
            Some("pkg/__init__.py [its doctests and load_tests]".into())
        );
    }
}
