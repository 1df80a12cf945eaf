//! Which test command a repository uses, judged from the files of its base commit.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detected {
    Command(String),
    BuiltinPython,
}

/// `paths` are the repository's files (relative, `/`-separated); `read` gives a file's text.
pub fn detect(
    paths: &[String],
    read: &dyn Fn(&str) -> Option<String>,
    pytest_available: bool,
) -> Option<Detected> {
    let has = |name: &str| paths.iter().any(|p| p == name);
    if has("Cargo.toml") {
        return Some(Detected::Command("cargo test".into()));
    }
    if has("go.mod") {
        return Some(Detected::Command("go test ./...".into()));
    }
    if has("package.json") && read("package.json").is_some_and(|t| has_npm_test_script(&t)) {
        return Some(Detected::Command("npm test".into()));
    }
    if paths.iter().any(|p| is_python_test_file(p)) {
        return Some(if pytest_available {
            Detected::Command("python3 -m pytest -q".into())
        } else {
            Detected::BuiltinPython
        });
    }
    None
}

fn has_npm_test_script(package_json: &str) -> bool {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(package_json) else {
        return false;
    };
    value["scripts"]["test"]
        .as_str()
        .is_some_and(|s| !s.contains("no test specified"))
}

fn is_python_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py"))
}

/// Whether `python3 -m pytest` would work here.
pub fn pytest_available() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import pytest"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect_in(files: &[(&str, &str)], pytest: bool) -> Option<Detected> {
        let paths: Vec<String> = files.iter().map(|(p, _)| p.to_string()).collect();
        let read = |name: &str| {
            files
                .iter()
                .find(|(p, _)| *p == name)
                .map(|(_, t)| t.to_string())
        };
        detect(&paths, &read, pytest)
    }

    #[test]
    fn detects_by_marker_files() {
        let cmd = |s: &str| Some(Detected::Command(s.into()));
        assert_eq!(detect_in(&[("Cargo.toml", "")], false), cmd("cargo test"));
        assert_eq!(detect_in(&[("go.mod", "")], false), cmd("go test ./..."));
        assert_eq!(
            detect_in(
                &[("package.json", r#"{"scripts":{"test":"node --test"}}"#)],
                false
            ),
            cmd("npm test")
        );
        assert_eq!(
            detect_in(&[("src/calc.py", ""), ("tests/test_calc.py", "")], true),
            cmd("python3 -m pytest -q")
        );
        assert_eq!(
            detect_in(&[("calc_test.py", "")], false),
            Some(Detected::BuiltinPython)
        );
    }

    #[test]
    fn npm_placeholder_script_and_no_tests_detect_nothing() {
        let npm_init = r#"{"scripts":{"test":"echo \"Error: no test specified\" && exit 1"}}"#;
        assert_eq!(detect_in(&[("package.json", npm_init)], false), None);
        assert_eq!(detect_in(&[("README.md", ""), ("calc.py", "")], true), None);
    }
}
