//! Path resolution and the protected-path policy. Every path a model names passes through here
//! before any tool touches the disk.

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use std::path::{Component, Path, PathBuf};

mod config;
mod source;

pub use config::changed_test_sections;
pub use source::rust_test_module_files;

/// Test files that common runners collect by default: gitignore-style patterns, matched
/// anywhere and without regard to case (`Tests/` is `tests/`).
pub const DEFAULT_TESTS: &[&str] = &[
    "test_*.py",
    "*_test.py",
    "tests/",
    "test/",
    "spec/",
    "__tests__/",
    "testdata/",
    "*.test.*",
    "*.spec.*",
    "*-test.js",
    "*-test.cjs",
    "*-test.mjs",
    "*_test.js",
    "*_test.cjs",
    "*_test.mjs",
    "test-*.js",
    "test-*.cjs",
    "test-*.mjs",
    "test.js",
    "test.cjs",
    "test.mjs",
    "*_test.go",
    "*_spec.rb",
];

/// Files that configure a runner or choose the interpreter it runs on.
pub const DEFAULT_RUNNER_CONFIG: &[&str] = &[
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "tox.ini",
    "noxfile.py",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".mocharc.*",
    "jest.config.*",
    "vitest.config.*",
    ".cargo/",
    "rust-toolchain",
    "rust-toolchain.toml",
    ".python-version",
    ".nvmrc",
    ".node-version",
    ".tool-versions",
    // How git writes the files the tests read (eol, filters) and what an export holds.
    ".gitattributes",
    ".agentgit",
    // Where pytest keeps state between runs (`--lf`, its cache plugin): the clean room runs
    // without it, so a tracked copy would be read by a fresh checkout alone.
    ".pytest_cache",
];

/// Names that would stand in for a runner, its dependencies or the interpreter's start-up:
/// a new file here changes what runs the tests, not the code under test.
pub const DEFAULT_SHADOWS: &[&str] = &[
    "/pytest.py",
    "/pytest/",
    "/_pytest/",
    "/py.py",
    "/pluggy.py",
    "/pluggy/",
    "/iniconfig/",
    "/unittest.py",
    "/unittest/",
    "/doctest.py",
    "sitecustomize.py",
    "usercustomize.py",
    "*.pth",
    "__pycache__/",
    "*.pyc",
    // Package metadata on sys.path registers plugins (pytest11 entry points) and paths.
    "*.dist-info/",
    "*.egg-info/",
    "*.egg-link",
    "node_modules/",
];

/// Which paths the agent may never add, change, delete or rename, and which test sections of
/// shared config files it may not change.
#[derive(Debug, Clone)]
pub struct Protection {
    /// The defaults and the runner's own patterns: matched without regard to case.
    defaults: Gitignore,
    /// The user's patterns (flags, git config, `.agentgit`): matched as written.
    extra: Gitignore,
    /// Where no new file may appear (a package unittest's discovery would import).
    no_new: Gitignore,
    /// Names no new module may take where the runner would import it first.
    shadows: Shadows,
    /// The patterns `defaults` and `extra` were made of, as written, for a key of what
    /// they protect in a tree (`covered_key`).
    covered: Vec<u8>,
}

/// The directories the interpreter looks in first when the tests run (the tree's root under
/// `python3 -m`, and each directory pytest puts on `sys.path` for its tests), and the names a
/// module there would steal from outside the tree (the standard library, installed packages).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shadows {
    /// Relative to the root; the empty path is the root itself.
    pub dirs: Vec<PathBuf>,
    /// Top-level module names (`json`, `pluggy`), without suffixes.
    pub names: std::collections::BTreeSet<String>,
}

impl Shadows {
    /// Whether a new `rel` would stand in for a module of that name: `json.py`, `json/`,
    /// `json.cpython-311-x86_64-linux-gnu.so` in one of the directories.
    fn covers(&self, rel: &Path) -> bool {
        self.dirs.iter().any(|dir| {
            let Ok(inside) = rel.strip_prefix(dir) else {
                return false;
            };
            let mut parts = inside.components();
            let Some(first) = parts.next() else {
                return false;
            };
            let first = first.as_os_str().to_string_lossy();
            // Inside a new directory, or a name without a suffix (a link to a directory): a
            // package of that name.
            let is_package = parts.next().is_some() || !first.contains('.');
            let module = if is_package {
                Some(first.as_ref())
            } else {
                first.split_once('.').and_then(|(stem, ext)| {
                    let native = ext.ends_with("so") || ext.ends_with("pyd");
                    (ext == "py" || native).then_some(stem)
                })
            };
            module.is_some_and(|m| self.names.contains(m))
        })
    }
}

impl Protection {
    /// The default patterns, `runner` (what the detected runner collects and reads, matched
    /// like the defaults) and `extra` (from flags and config, matched as written).
    pub fn new(runner: &[String], extra: &[String]) -> Result<Self, String> {
        Self::with_no_new(runner, &[], Shadows::default(), extra)
    }

    /// As `new`, and where the agent may not add a file, though it may change one the base
    /// has there: `no_new` patterns, and modules that `shadows` covers.
    pub fn with_no_new(
        runner: &[String],
        no_new: &[String],
        shadows: Shadows,
        extra: &[String],
    ) -> Result<Self, String> {
        let defaults = DEFAULT_TESTS
            .iter()
            .chain(DEFAULT_RUNNER_CONFIG)
            .chain(DEFAULT_SHADOWS)
            .map(|p| p.to_string())
            .chain(runner.iter().cloned());
        let defaults: Vec<String> = defaults.collect();
        // Each list after its length, each pattern after its own: no two lists read alike.
        let mut covered = Vec::new();
        for list in [&defaults[..], extra] {
            covered.extend_from_slice(&(list.len() as u64).to_le_bytes());
            for pattern in list {
                covered.extend_from_slice(&(pattern.len() as u64).to_le_bytes());
                covered.extend_from_slice(pattern.as_bytes());
            }
        }
        Ok(Protection {
            defaults: matcher(defaults.into_iter(), true)?,
            extra: matcher(extra.iter().cloned(), false)?,
            no_new: matcher(no_new.iter().cloned(), false)?,
            shadows,
            covered,
        })
    }

    /// What decides which entries of a tree this protection covers (`is_protected_dir`,
    /// `is_protected_in_open_dir`): the patterns as written, and that the first list is
    /// matched without regard to case. Two protections with the same cover the same entries.
    pub fn covered_key(&self) -> &[u8] {
        &self.covered
    }

    /// Whether the directory `rel` is protected as a whole (`tests/`).
    pub fn is_protected_dir(&self, rel: &Path) -> bool {
        !rel.as_os_str().is_empty()
            && [&self.defaults, &self.extra]
                .iter()
                .any(|m| m.matched_path_or_any_parents(rel, true).is_ignore())
    }

    /// Whether a new file may not appear at `rel`.
    pub fn refuses_new(&self, rel: &Path) -> bool {
        !rel.as_os_str().is_empty()
            && (self
                .no_new
                .matched_path_or_any_parents(rel, false)
                .is_ignore()
                || self.shadows.covers(rel))
    }

    /// `is_protected`, for a path none of whose folders is protected (`is_protected_dir` said
    /// no to each, as a walk from the top finds them): then only the path itself can match,
    /// and it is matched alone, not again with each folder above it.
    pub fn is_protected_in_open_dir(&self, rel: &Path) -> bool {
        if rel.as_os_str().is_empty() || rel.has_root() {
            return false;
        }
        [&self.defaults, &self.extra]
            .iter()
            .any(|m| m.matched(rel, false).is_ignore() || m.matched(rel, true).is_ignore())
    }

    /// Whether a path relative to the work tree root, or any directory above it, is protected.
    pub fn is_protected(&self, rel: &Path) -> bool {
        if rel.as_os_str().is_empty() || rel.has_root() {
            return false;
        }
        // Matched as a file and as a directory: a symbolic link named `tests` or `.cargo` is
        // a directory to whoever follows it.
        [&self.defaults, &self.extra].iter().any(|m| {
            m.matched_path_or_any_parents(rel, false).is_ignore()
                || m.matched_path_or_any_parents(rel, true).is_ignore()
        })
    }
}

fn matcher(
    patterns: impl Iterator<Item = String>,
    case_insensitive: bool,
) -> Result<Gitignore, String> {
    let mut builder = GitignoreBuilder::new("");
    builder
        .case_insensitive(case_insensitive)
        .map_err(|e| e.to_string())?;
    for pattern in patterns {
        builder
            .add_line(None, &pattern)
            .map_err(|e| format!("bad protected pattern `{pattern}`: {e}"))?;
    }
    builder
        .build()
        .map_err(|e| format!("bad protected patterns: {e}"))
}

/// Why a path was refused. The messages go back to the model, so they say what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path was empty, or only blanks.
    #[error("refused: an empty path; name a file relative to the repository root")]
    Empty,
    /// The path, as given, holds a `\0`.
    #[error("refused: {0:?} contains a NUL byte, which no file name can hold")]
    Nul(String),
    /// The path, as given, starts at `/`.
    #[error("refused: {0} is absolute; use a path relative to the repository root")]
    Absolute(String),
    /// The path, or a symlink on the way, leaves the work tree.
    #[error("refused: {0} leads outside the repository")]
    Escapes(String),
    /// The path, or where a symlink on it leads, is in a `.git` directory or file.
    #[error("refused: {0} is inside .git; the agent may not touch git's own files")]
    InsideGit(String),
    /// A symlink on the path has no target, so where a write would land is unknown.
    #[error("refused: {0} is a symlink that points nowhere")]
    DanglingLink(String),
    /// A write to a path the protection covers (a test file, the runner's config).
    #[error("refused: {0} is a protected test file; change the code under test instead")]
    Protected(String),
}

/// A path that passed the guard: the name the model gave (normalized) and where it really is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Relative to the root, `..` and `.` folded away; what reports show.
    pub rel: PathBuf,
    /// The absolute location after following symlinks (for a new file: its would-be location).
    pub real: PathBuf,
}

/// Checks every path the model names against one work tree and its protection, before a tool
/// reads or writes it.
pub struct Guard {
    root: PathBuf,
    protection: Protection,
}

impl Guard {
    /// `root` is the work tree; it is canonicalized so symlink checks compare like with like.
    pub fn new(root: &Path, protection: Protection) -> std::io::Result<Self> {
        Ok(Guard {
            root: root.canonicalize()?,
            protection,
        })
    }

    /// The work tree, canonicalized.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The paths writes are refused on.
    pub fn protection(&self) -> &Protection {
        &self.protection
    }

    /// For reading: the path must stay inside the work tree and out of `.git`.
    pub fn check_read(&self, path: &str) -> Result<Resolved, PathError> {
        let rel = normalize(path)?;
        let real = self.follow_links(&rel, path)?;
        Ok(Resolved { rel, real })
    }

    /// For writing, editing, deleting: as for reading, and neither the named path nor the file
    /// a symlink leads to may be protected.
    pub fn check_write(&self, path: &str) -> Result<Resolved, PathError> {
        let resolved = self.check_read(path)?;
        let real_rel = resolved
            .real
            .strip_prefix(&self.root)
            .unwrap_or(&resolved.real);
        if self.protection.is_protected(&resolved.rel) || self.protection.is_protected(real_rel) {
            return Err(PathError::Protected(display(&resolved.rel)));
        }
        Ok(resolved)
    }

    /// Follows symlinks on the longest existing prefix and checks where they lead.
    fn follow_links(&self, rel: &Path, given: &str) -> Result<PathBuf, PathError> {
        let full = self.root.join(rel);
        let mut existing = full.as_path();
        while existing != self.root && std::fs::symlink_metadata(existing).is_err() {
            existing = existing.parent().unwrap_or(&self.root);
        }
        let canonical = existing
            .canonicalize()
            .map_err(|_| PathError::DanglingLink(given.to_string()))?;
        let rest = full.strip_prefix(existing).unwrap_or(Path::new(""));
        let real = if rest.as_os_str().is_empty() {
            canonical
        } else {
            canonical.join(rest)
        };
        let inside = real
            .strip_prefix(&self.root)
            .map_err(|_| PathError::Escapes(given.to_string()))?;
        if inside.components().any(|c| names_git_dir(c.as_os_str())) {
            return Err(PathError::InsideGit(given.to_string()));
        }
        Ok(real)
    }
}

/// Folds `.` and `..` lexically; refuses absolute paths, escapes and anything under `.git`.
pub fn normalize(path: &str) -> Result<PathBuf, PathError> {
    let trimmed = path.trim();
    if trimmed.is_empty() {
        return Err(PathError::Empty);
    }
    if trimmed.contains('\0') {
        return Err(PathError::Nul(trimmed.to_string()));
    }
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for component in Path::new(trimmed).components() {
        match component {
            Component::Prefix(_) | Component::RootDir => {
                return Err(PathError::Absolute(trimmed.to_string()))
            }
            Component::CurDir => {}
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err(PathError::Escapes(trimmed.to_string()));
                }
            }
            Component::Normal(part) => {
                if names_git_dir(part) {
                    return Err(PathError::InsideGit(trimmed.to_string()));
                }
                parts.push(part);
            }
        }
    }
    Ok(parts.iter().collect())
}

/// Whether git takes a path component for its own directory, and so will not store a file
/// under it: `.git` in any case, with trailing dots or spaces, or its short name `git~1`.
fn names_git_dir(part: &std::ffi::OsStr) -> bool {
    let name = part.to_string_lossy().to_lowercase();
    let name = name.trim_end_matches(['.', ' ']);
    name == ".git" || name == "git~1"
}

/// A relative path as reports and the model see it: forward slashes, `.` for the root.
pub fn display(rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        ".".to_string()
    } else {
        rel.to_string_lossy().into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protection() -> Protection {
        Protection::new(
            &["test*.py".to_string()],
            &["docs/golden/*.txt".to_string()],
        )
        .unwrap()
    }

    /// A walk from the top that matches each file alone, in folders found open, finds what
    /// matching each path with its folders finds: also where a pattern opens a folder again.
    #[test]
    fn a_file_in_open_folders_is_protected_as_its_whole_path_is() {
        let p = Protection::new(
            &[
                "fixtures/**/*.json".to_string(),
                "!fixtures/keep.json".to_string(),
            ],
            &[
                "docs/golden/*.txt".to_string(),
                "!docs/golden/free.txt".to_string(),
            ],
        )
        .unwrap();
        let paths = [
            "calc.py",
            "test_calc.py",
            "pkg/calc_test.py",
            "pkg/deep/a.spec.js",
            "pkg/deep/plain.js",
            "fixtures/a.json",
            "fixtures/keep.json",
            "fixtures/sub/b.json",
            "docs/golden/x.txt",
            "docs/golden/free.txt",
            "docs/readme.md",
            "Cargo.toml",
            "sub/conftest.py",
            "TESTS.md",
        ];
        let mut compared = 0;
        for path in paths {
            let path = Path::new(path);
            let open = path.ancestors().skip(1).all(|dir| !p.is_protected_dir(dir));
            if open {
                compared += 1;
                assert_eq!(
                    p.is_protected_in_open_dir(path),
                    p.is_protected(path),
                    "{}",
                    path.display()
                );
            }
        }
        assert_eq!(compared, paths.len(), "every folder here is open");
    }

    #[test]
    fn default_patterns_protect_tests_and_runner_config() {
        let p = protection();
        for path in [
            "test_calc.py",
            "pkg/calc_test.py",
            "tests/helpers.py",
            "src/tests/deep/data.json",
            "test/a.c",
            "spec/x.rb",
            "web/__tests__/a.js",
            "web/a.test.ts",
            "web/a.spec.js",
            "calc_test.go",
            "lib/calc_spec.rb",
            "conftest.py",
            "sub/conftest.py",
            "pytest.ini",
            "tox.ini",
            ".agentgit",
            "docs/golden/out.txt",
            "Tests/helpers.py",
            "TEST_CALC.PY",
            "pytest.py",
            "_pytest/python.py",
            "pkg/sitecustomize.py",
            "lib/evil.pth",
            "__pycache__/calc.cpython-311.pyc",
            "node_modules/.bin/node",
            "web/add-test.mjs",
            ".cargo/config.toml",
            "pyproject/x/conftest.py",
            ".gitattributes",
            "testdata/.gitattributes",
            "flipper-1.0.dist-info/entry_points.txt",
            "calc.egg-info/PKG-INFO",
            ".pytest_cache",
            "sub/.pytest_cache/v/cache/lastfailed",
        ] {
            assert!(
                p.is_protected(Path::new(path)),
                "{path} should be protected"
            );
        }
        assert!(
            !Protection::new(&[], &[])
                .unwrap()
                .is_protected(Path::new("src/testing.py")),
            "only unittest discovery collects test*.py"
        );
        for path in ["src/testing.py", "test0.py"] {
            assert!(
                p.is_protected(Path::new(path)),
                "{path}: unittest collects it"
            );
        }
        for path in [
            "calc.py",
            "latest.py",
            "contest.py",
            "docs/golden/out.md",
            "Docs/golden/out.txt",
            "src/pytest.py",
            "pkg/unittest.py",
            "calc.js",
            "",
        ] {
            assert!(!p.is_protected(Path::new(path)), "{path} should be free");
        }
    }

    #[test]
    fn new_modules_may_not_stand_in_for_outside_ones_where_the_tests_look_first() {
        let shadows = Shadows {
            dirs: vec![PathBuf::new(), PathBuf::from("pkg")],
            names: ["json", "pluggy"].map(String::from).into(),
        };
        let p = Protection::with_no_new(&[], &[], shadows, &[]).unwrap();
        for path in [
            "json.py",
            "json",
            "pluggy/__init__.py",
            "json.cpython-311-x86_64-linux-gnu.so",
            "pkg/json.py",
            "pkg/json/decoder.py",
        ] {
            assert!(p.refuses_new(Path::new(path)), "{path}");
        }
        for path in [
            "calc.py",
            "lib/json.py",
            "jsonx.py",
            "json.txt",
            "pkg/calc.py",
        ] {
            assert!(!p.refuses_new(Path::new(path)), "{path}");
        }
    }

    #[test]
    fn bad_extra_pattern_is_an_error() {
        let err = Protection::new(&[], &["src/{a,b".to_string()]).unwrap_err();
        assert!(err.contains("src/{a,b"), "{err}");
    }

    #[test]
    fn normalize_folds_dots_and_refuses_escapes() {
        assert_eq!(normalize("./a/../b/c.py"), Ok(PathBuf::from("b/c.py")));
        assert_eq!(normalize("."), Ok(PathBuf::new()));
        assert_eq!(normalize("  "), Err(PathError::Empty));
        assert_eq!(normalize("a\0.py"), Err(PathError::Nul("a\0.py".into())));
        assert_eq!(
            normalize("/etc/passwd"),
            Err(PathError::Absolute("/etc/passwd".into()))
        );
        assert_eq!(
            normalize("a/../../x"),
            Err(PathError::Escapes("a/../../x".into()))
        );
        assert_eq!(
            normalize(".git/hooks/pre-commit"),
            Err(PathError::InsideGit(".git/hooks/pre-commit".into()))
        );
        assert_eq!(
            normalize("sub/.git/config"),
            Err(PathError::InsideGit("sub/.git/config".into()))
        );
        for alias in [
            "git~1/offset.txt",
            "GIT~1/x",
            ".Git/x",
            ".git./x",
            "a/.git /x",
        ] {
            assert_eq!(
                normalize(alias),
                Err(PathError::InsideGit(alias.into())),
                "git stores nothing under {alias}"
            );
        }
        assert_eq!(normalize("git~2/x"), Ok(PathBuf::from("git~2/x")));
        assert_eq!(normalize(".github/x"), Ok(PathBuf::from(".github/x")));
    }

    #[test]
    fn guard_follows_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("tests")).unwrap();
        std::fs::write(root.join("tests/test_a.py"), "").unwrap();
        std::fs::write(root.join("calc.py"), "").unwrap();
        std::os::unix::fs::symlink(root.join("tests/test_a.py"), root.join("alias.py")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
        std::os::unix::fs::symlink(root.join("missing"), root.join("dangling.py")).unwrap();
        let guard = Guard::new(root, protection()).unwrap();

        assert!(guard.check_write("calc.py").is_ok());
        assert!(guard.check_write("new/dir/file.py").is_ok());
        assert_eq!(
            guard.check_write("alias.py"),
            Err(PathError::Protected("alias.py".into()))
        );
        assert!(guard.check_read("alias.py").is_ok());
        assert_eq!(
            guard.check_read("out/x.txt"),
            Err(PathError::Escapes("out/x.txt".into()))
        );
        assert_eq!(
            guard.check_write("dangling.py"),
            Err(PathError::DanglingLink("dangling.py".into()))
        );
        assert_eq!(
            guard.check_write("tests/test_a.py"),
            Err(PathError::Protected("tests/test_a.py".into()))
        );
    }
}
