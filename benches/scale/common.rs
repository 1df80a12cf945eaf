//! What every section shares: the repositories, running git, and the side-by-side table.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub const CALC: &str = "def add(a, b):\n    return a + b\n";
pub const TEST_CALC: &str = "import unittest\nfrom calc import add\n\n\n\
    class T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n";
/// A string that occurs in exactly one file of the repository.
pub const RARE: &str = "needle_in_the_haystack";

pub struct Options {
    pub sizes: Vec<usize>,
    pub runs: usize,
    only: Option<String>,
}

impl Options {
    pub fn from_args() -> Options {
        let mut options = Options {
            sizes: vec![10_000, 100_000],
            runs: 7,
            only: None,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--sizes" => {
                    let list = args.next().expect("--sizes N,N");
                    options.sizes = list
                        .split(',')
                        .map(|n| n.parse().expect("--sizes takes numbers"))
                        .collect();
                }
                "--runs" => {
                    options.runs = args.next().and_then(|n| n.parse().ok()).expect("--runs N");
                }
                "--only" => options.only = args.next(),
                // cargo bench passes `--bench`.
                _ => {}
            }
        }
        options
    }

    /// Whether the section `name` is to run (`--only` names a part of it).
    pub fn wants(&self, name: &str) -> bool {
        self.only.as_deref().is_none_or(|only| name.contains(only))
    }
}

/// A committed repository: `calc.py` and its test at the root, and `pkg/dNNN/mNNNNNN.py`,
/// 100 modules to a folder, each with a function and a class: source, as most of a real
/// repository is, for what reads source (the brief's map) to pay what it would there.
pub struct Repo {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub files: usize,
}

impl Repo {
    pub fn make(files: usize) -> Repo {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("repo");
        std::fs::create_dir(&path).expect("mkdir");
        git(&path, &["init", "-q", "-b", "main"]);
        write(&path.join("calc.py"), CALC);
        write(&path.join("test_calc.py"), TEST_CALC);
        write(&path.join(".gitignore"), "__pycache__/\n*.pyc\n");
        for i in 0..files {
            let sub = path.join(format!("pkg/d{:03}", i / 100));
            if i % 100 == 0 {
                std::fs::create_dir_all(&sub).expect("mkdir");
            }
            let rare = if i == files / 2 {
                format!("\n{RARE} = {i}\n")
            } else {
                String::new()
            };
            let text = format!(
                "\"\"\"Module {i}.\"\"\"\n\n\ndef value_{i}(x):\n    return x * {i}\n\n\n\
                 class Part{i}:\n    def size(self):\n        return {i}\n{rare}"
            );
            write(&sub.join(format!("m{i:06}.py")), &text);
        }
        git(&path, &["add", "-A"]);
        git(&path, &["commit", "-q", "-m", "base"]);
        Repo {
            _dir: dir,
            path,
            files,
        }
    }

    /// The commit `main` points at.
    pub fn base(&self) -> git2::Oid {
        let repo = git2::Repository::open(&self.path).expect("open");
        let head = repo.head().and_then(|h| h.peel_to_commit()).expect("head");
        head.id()
    }
}

pub fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write");
}

/// git, isolated from the machine's config, with fixed identities; panics if it fails.
pub fn git(dir: &Path, args: &[&str]) {
    let status = git_command(dir, args).status().expect("git runs");
    assert!(status.success(), "git {args:?}");
}

pub fn git_command(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new("git");
    command
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com");
    command
}

/// How long `f` takes.
pub fn time(f: &mut dyn FnMut()) -> Duration {
    let started = Instant::now();
    f();
    started.elapsed()
}

/// Whether `program` is on PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Runs `operation` and `floor` alternately `runs` times (each returns what it measured),
/// and prints their line (`side_by_side`).
pub fn compare(
    label: &str,
    runs: usize,
    target: f64,
    operation: &mut dyn FnMut() -> Duration,
    floor_label: &str,
    floor: &mut dyn FnMut() -> Duration,
) {
    let mut ours = Vec::with_capacity(runs);
    let mut theirs = Vec::with_capacity(runs);
    for _ in 0..runs {
        ours.push(operation());
        theirs.push(floor());
    }
    side_by_side(label, ours, floor_label, theirs, target);
}

/// One line: the median and minimum of `ours` and of `theirs` (the floor's), and the ratio of
/// the medians beside the target (`at most` that ratio).
pub fn side_by_side(
    label: &str,
    ours: Vec<Duration>,
    floor_label: &str,
    theirs: Vec<Duration>,
    target: f64,
) {
    let (ours, theirs) = (Stats::of(ours), Stats::of(theirs));
    let ratio = ours.median.as_secs_f64() / theirs.median.as_secs_f64().max(1e-9);
    let verdict = if ratio <= target { "ok" } else { "OVER" };
    println!(
        "  {label:<40} {}   {floor_label:<34} {}   {ratio:>5.2}x (target {target}x) {verdict}",
        ours.text(),
        theirs.text()
    );
}

/// Median and minimum of some samples.
pub struct Stats {
    pub median: Duration,
    pub min: Duration,
}

impl Stats {
    pub fn of(mut samples: Vec<Duration>) -> Stats {
        samples.sort();
        Stats {
            median: samples[samples.len() / 2],
            min: samples[0],
        }
    }

    pub fn text(&self) -> String {
        format!(
            "{:>8.1} ms ({:>7.1})",
            self.median.as_secs_f64() * 1e3,
            self.min.as_secs_f64() * 1e3
        )
    }
}
