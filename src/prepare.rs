//! What a run (`fix`) and a check (`check`, the pre-push hook) both prepare from a commit and
//! the settings: the test plan, the protected paths and the directories left writable.

use crate::guard::Protection;
use crate::settings::{config_layers, merge, Layer, Settings};
use crate::testrun::{collected, detect, Python, TestPlan, TreeFacts};
use crate::workspace::{read_blob, tree_files, SetupError};
use git2::{Oid, Repository};
use std::path::PathBuf;
use std::time::Duration;

/// Why a commit's tests could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// Reading the commit's tree or files from git failed.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// Neither the settings nor detection from the commit's files gave a test command.
    #[error(
        "cannot tell how to run this repository's tests; pass --test-cmd CMD or run \
         `git config agent-git.testCmd CMD`"
    )]
    NoTestCommand,
    /// A setting that cannot be used; the text says which and how to fix it.
    #[error("{0}")]
    Invalid(String),
}

/// The settings for `commit`: `flags` over git config over the commit's `.agentgit`.
pub fn settings_at(repo: &Repository, commit: Oid, flags: Layer) -> Result<Settings, PrepareError> {
    let mut layers = vec![flags];
    layers.extend(config_layers(repo, commit).map_err(PrepareError::Invalid)?);
    Ok(merge(&layers))
}

/// How the tests of a commit are run and what they stand on.
pub struct TestsAt {
    /// The command, runner and environment the tests run with.
    pub plan: TestPlan,
    /// The paths the agent may not change: what the runner reads, and the settings' `protect`.
    pub protection: Protection,
    /// Directories the sandbox leaves writable on the user's request.
    pub allow_write: Vec<PathBuf>,
    /// Paths under HOME the sandbox lets commands read on the user's request.
    pub allow_read: Vec<PathBuf>,
}

/// The test plan of `commit` (configured, else detected from its files), the protection its
/// runner calls for, and the writable directories the settings name. `python` is asked of
/// the `python3` on PATH at most once, and only when the commit holds Python files.
pub fn tests_at(
    repo: &Repository,
    commit: Oid,
    settings: &Settings,
    python: &mut AskedPython,
) -> Result<TestsAt, PrepareError> {
    // Listed once: on a large tree a listing is a tenth of a second.
    let files = tree_files(repo, commit)?;
    let plan = plan_of_files(repo, commit, &files, settings, python)?;
    tests_for_plan(repo, commit, &files, settings, python, plan)
}

/// What `plan` needs to run at `commit`, whose files are `files`: the protection of its
/// runner (python3 asked for its modules when the commit holds Python files) and the
/// writable directories.
pub fn tests_for_plan(
    repo: &Repository,
    commit: Oid,
    files: &[String],
    settings: &Settings,
    python: &mut AskedPython,
    plan: TestPlan,
) -> Result<TestsAt, PrepareError> {
    let modules = &facts(files, python, plan.venv.as_deref()).modules;
    tests_with_files(repo, commit, files, settings, modules, plan)
}

/// The test plan alone. `python3` is asked only when detection needs to know whether it has
/// pytest.
pub fn plan_at(
    repo: &Repository,
    commit: Oid,
    settings: &Settings,
    python: &mut AskedPython,
) -> Result<TestPlan, PrepareError> {
    plan_of_files(repo, commit, &tree_files(repo, commit)?, settings, python)
}

/// `plan_at`, with the commit's files as `tree_files` lists them.
pub fn plan_of_files(
    repo: &Repository,
    commit: Oid,
    files: &[String],
    settings: &Settings,
    python: &mut AskedPython,
) -> Result<TestPlan, PrepareError> {
    let read =
        |p: &str| read_blob(repo, commit, p).map(|b| String::from_utf8_lossy(&b).into_owned());
    let none = PythonFacts::default();
    let tree = repo.find_commit(commit).and_then(|c| c.tree()).ok();
    let venv = project_venv(repo.workdir(), tree.as_ref());
    let python = match settings.test_cmd {
        None => facts(files, python, venv.as_deref()),
        Some(_) => &none,
    };
    let mut plan = test_plan(files, &read, settings, python)?;
    node_environment(&mut plan, tree.as_ref(), repo.workdir());
    if let Some(venv) = venv.filter(|_| files.iter().any(|p| p.ends_with(".py"))) {
        plan.rules.push(format!(
            "venv: {} in your checkout, not active here, is the tests' python3 (read-only)",
            venv.file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into_owned())
        ));
        plan.venv = Some(venv);
    }
    Ok(plan)
}

/// A Node project's packages as the user installed them in the checkout: the tree the tests
/// run in has only what is committed, and no network to install anything.
fn node_environment(
    plan: &mut TestPlan,
    tree: Option<&git2::Tree>,
    workdir: Option<&std::path::Path>,
) {
    let tracked = |path| tracked_entry(tree, path);
    if !tracked("package.json") || tracked("node_modules") || plan.setup.is_some() {
        return;
    }
    let Some(installed) = workdir
        .map(|w| w.join("node_modules"))
        .and_then(|dir| dir.canonicalize().ok())
        .filter(|dir| dir.is_dir())
    else {
        return;
    };
    plan.rules.push(
        "node_modules: the packages installed in your checkout, read-only, through NODE_PATH \
         and PATH (a fresh checkout needs `npm ci`)"
            .into(),
    );
    plan.node_modules = Some(installed);
}

/// What `plan` calls for: the protection of its runner and the writable directories.
/// `python_modules` (what python3 imports from outside the tree) only keep new modules from
/// shadowing those; which existing paths are protected does not depend on them.
pub fn tests_with_plan(
    repo: &Repository,
    commit: Oid,
    settings: &Settings,
    python_modules: &[String],
    plan: TestPlan,
) -> Result<TestsAt, PrepareError> {
    let files = tree_files(repo, commit)?;
    tests_with_files(repo, commit, &files, settings, python_modules, plan)
}

/// `tests_with_plan` for the commit's `files`, walked once.
fn tests_with_files(
    repo: &Repository,
    commit: Oid,
    files: &[String],
    settings: &Settings,
    python_modules: &[String],
    plan: TestPlan,
) -> Result<TestsAt, PrepareError> {
    let read =
        |p: &str| read_blob(repo, commit, p).map(|b| String::from_utf8_lossy(&b).into_owned());
    let mut found = collected(plan.runner, &plan.command, files, &read, python_modules);
    // A folder put on PYTHONPATH (a src layout's) is where a new module would shadow one.
    for dir in plan.python_path.iter().map(PathBuf::from) {
        if !found.shadows.dirs.contains(&dir) {
            found.shadows.dirs.push(dir);
        }
    }
    let protection = Protection::with_no_new(
        &found.protected,
        &found.no_new,
        found.shadows,
        &settings.protect,
    )
    .map_err(PrepareError::Invalid)?;
    let allow_write = writable_dirs(&settings.allow_write)?;
    let allow_read = readable_paths(&settings.allow_read)?;
    Ok(TestsAt {
        plan,
        protection,
        allow_write,
        allow_read,
    })
}

/// The virtualenv in the user's checkout (`.venv` or `venv`) when none is active: the one
/// the project's tests are run with. Only one the user made: a committed one is the
/// repository's, whose python3 agent-git would run outside the sandbox to ask about it.
fn project_venv(workdir: Option<&std::path::Path>, tree: Option<&git2::Tree>) -> Option<PathBuf> {
    if std::env::var_os("VIRTUAL_ENV").is_some() {
        return None;
    }
    let workdir = workdir?.canonicalize().ok()?;
    // Any entry in its place (a folder of files, a submodule, a link) makes it the repository's.
    let venv = [".venv", "venv"]
        .into_iter()
        .filter(|name| !tracked_entry(tree, name))
        .map(|name| workdir.join(name))
        .find(|dir| dir.join("pyvenv.cfg").is_file() && dir.join("bin/python3").exists())?;
    // A PATH that already leads to it (a venv activated by hand, without VIRTUAL_ENV).
    let on_path = std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .any(|entry| {
            std::path::Path::new(entry)
                .canonicalize()
                .is_ok_and(|p| p.starts_with(&venv))
        });
    (!on_path).then_some(venv)
}

/// Whether `tree` has an entry of any kind (a folder, a submodule, a link) at `path`.
fn tracked_entry(tree: Option<&git2::Tree>, path: &str) -> bool {
    tree.is_some_and(|t| t.get_path(std::path::Path::new(path)).is_ok())
}

/// What python3 brings, asked once; nothing for a tree without Python files. `venv` is the
/// checkout's own virtualenv, whose python3 the tests use.
fn facts<'p>(
    files: &[String],
    python: &'p mut AskedPython,
    venv: Option<&std::path::Path>,
) -> &'p PythonFacts {
    static NONE: PythonFacts = PythonFacts {
        pytest: false,
        modules: Vec::new(),
        distributions: Vec::new(),
    };
    if files.iter().any(|p| p.ends_with(".py")) {
        python.facts(venv)
    } else {
        &NONE
    }
}

/// The configured test command, or the one the commit's files point to.
fn test_plan(
    files: &[String],
    read: &dyn Fn(&str) -> Option<String>,
    settings: &Settings,
    python: &PythonFacts,
) -> Result<TestPlan, PrepareError> {
    let timeout = Duration::from_secs(settings.test_timeout);
    let mut plan = match &settings.test_cmd {
        Some(cmd) => TestPlan::shell(cmd.clone(), timeout),
        None => {
            let python = Python {
                pytest: python.pytest,
                installed: &|name| python.has_distribution(name),
            };
            let detected = detect(files, read, &python).ok_or(PrepareError::NoTestCommand)?;
            TestPlan::from_detected(detected, timeout)
        }
    };
    plan.setup = settings.setup_cmd.clone();
    python_environment(&mut plan, files, read);
    Ok(plan)
}

/// What the tree says of the Python environment its tests need: a src layout's `src` first on
/// PYTHONPATH, the way an editable install puts it on the path (a venv's own editable install
/// points at the user's checkout, which the tests may not read).
fn python_environment(
    plan: &mut TestPlan,
    files: &[String],
    read: &dyn Fn(&str) -> Option<String>,
) {
    plan.facts = TreeFacts::of(files, read);
    let conftests: Vec<String> = files
        .iter()
        .filter(|p| p.rsplit('/').next() == Some("conftest.py"))
        .cloned()
        .collect();
    if let Some(package) = plan.facts.src_layout(&conftests, read) {
        plan.python_path.push("src".into());
        plan.rules.push(format!(
            "src layout: the tests import `{package}`, which lives under src/, so src/ is first \
             on PYTHONPATH, as an editable install would put it"
        ));
    }
}

/// The directories the user made writable: they must exist, and are named by their real path.
fn writable_dirs(dirs: &[String]) -> Result<Vec<PathBuf>, PrepareError> {
    dirs.iter()
        .map(|dir| {
            std::fs::canonicalize(dir)
                .ok()
                .filter(|p| p.is_dir())
                .ok_or_else(|| {
                    PrepareError::Invalid(format!(
                        "--allow-write {dir}: no such directory; create it first, or fix \
                         agent-git.sandbox.allowWrite"
                    ))
                })
        })
        .collect()
}

fn readable_paths(paths: &[String]) -> Result<Vec<PathBuf>, PrepareError> {
    paths
        .iter()
        .map(|path| {
            std::fs::canonicalize(path).map_err(|e| {
                PrepareError::Invalid(format!(
                    "--allow-read {path}: {e}; name a path that is there, or fix \
                     agent-git.sandbox.allowRead"
                ))
            })
        })
        .collect()
}

/// What the `python3` on PATH brings: whether `python3 -m pytest` works, and the names it
/// imports from outside a project (its standard library and installed packages).
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PythonFacts {
    /// Whether `python3 -m pytest` runs.
    pub pytest: bool,
    /// Top-level module names python3 imports from outside a project; a new module of one of
    /// these names in the tree is refused (`guard::Shadows`).
    pub modules: Vec<String>,
    /// The installed distributions, lower-case with `_` for `-` and `.`, sorted.
    pub distributions: Vec<String>,
}

impl PythonFacts {
    /// Whether distribution `name` (`pytest-cov`, `PyYAML`) is installed.
    pub fn has_distribution(&self, name: &str) -> bool {
        let name = name.to_lowercase().replace(['-', '.'], "_");
        self.distributions.binary_search(&name).is_ok()
    }
}

/// What python3 prints first, whatever else it is asked: its version and flags, and the
/// stat data of its executable and of each folder (or zip) it imports from. Installing,
/// removing or upgrading a package adds or removes entries of a folder on that path, which
/// moves the folder's change time; a `.pth` file that adds a folder changes the path itself.
/// Given the stamp of an earlier answer as its argument, it says `same` where nothing of that
/// moved, and stops there: its facts (reading every installed distribution's metadata, and
/// importing pytest) cost four times what starting python3 does.
const PYTHON_STAMP: &str = "\
import os, sys
def stamp_now():
    seen = []
    for path in [sys.executable, os.path.realpath(sys.executable)] + sys.path:
        try:
            s = os.stat(path)
            seen.append((path, s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns))
        except OSError:
            seen.append((path,))
    return repr((sys.version, tuple(sys.flags), seen))
stamp = stamp_now()
print('stamp:' + stamp)
if sys.argv[1:] == [stamp]:
    print('same')
    sys.exit(0)
";

/// What python3 prints last, after its facts: its stamp again. Where a package was being
/// installed while it answered, the two differ, and the answer goes with no stamp (the next
/// run asks in full).
const PYTHON_STAMP_AFTER: &str = "\
print('stamp:' + stamp_now())
";

const PYTHON_FACTS: &str = "\
names = set(getattr(sys, 'stdlib_module_names', ())) | set(sys.builtin_module_names)
try:
    import importlib.metadata as metadata
    names |= set(metadata.packages_distributions())
    for dist in metadata.distributions():
        print('dist:' + dist.metadata['Name'].lower().replace('-', '_').replace('.', '_'))
except Exception:
    pass
try:
    import pytest
    print('pytest')
except Exception:
    print('no pytest')
print('\\n'.join(sorted(n for n in names if n.isidentifier())))
";

/// What python3 answered: its facts and the stamp they go with, or that nothing moved since
/// the stamp it was given.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Same,
    Facts(PythonFacts, String),
}

/// Asks the `python3` on PATH, or `venv`'s: its facts, unless `known` (the stamp of an earlier
/// answer) is still its stamp. Default facts, with no stamp, when there is none or it fails.
fn ask_python(venv: Option<&std::path::Path>, known: Option<&str>) -> Answer {
    let failed = || Answer::Facts(PythonFacts::default(), String::new());
    let python = venv.map_or(PathBuf::from("python3"), |v| v.join("bin/python3"));
    // Unconfined, so nothing of the repository may be importable: isolated mode (no script
    // or current folder on sys.path, no PYTHON* variables, no user site, as the tests have
    // it) in an empty folder. A `csv.py` or `pytest.py` in the checkout is never run.
    let Ok(empty) = tempfile::tempdir() else {
        return failed();
    };
    use std::os::unix::process::CommandExt;
    let script = format!("{PYTHON_STAMP}{PYTHON_FACTS}{PYTHON_STAMP_AFTER}");
    let out = std::process::Command::new(python)
        .args(["-I", "-c", &script])
        .args(known)
        // Asked beside a run, it must not die of the Ctrl-C that the run answers with a report:
        // an answer cut short would be taken for python3's.
        .process_group(0)
        .current_dir(empty.path())
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    let Some(out) = out.ok().filter(|o| o.status.success()) else {
        return failed();
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let Some(stamp) = lines.next().and_then(|l| l.strip_prefix("stamp:")) else {
        return failed();
    };
    let mut rest: Vec<&str> = lines.collect();
    if rest == ["same"] && known == Some(stamp) {
        return Answer::Same;
    }
    let Some(after) = rest.pop().and_then(|l| l.strip_prefix("stamp:")) else {
        return failed();
    };
    let stamp = if after == stamp { stamp } else { "" };
    let (dists, rest): (Vec<&str>, Vec<&str>) = rest.iter().partition(|l| l.starts_with("dist:"));
    let mut distributions: Vec<String> = dists.iter().map(|d| d[5..].to_string()).collect();
    distributions.sort();
    let facts = PythonFacts {
        pytest: rest.first() == Some(&"pytest"),
        modules: rest.iter().skip(1).map(|l| l.to_string()).collect(),
        distributions,
    };
    Answer::Facts(facts, stamp.to_string())
}

/// Asks the `python3` on PATH, or `venv`'s; nothing when there is none.
pub fn python_facts(venv: Option<&std::path::Path>) -> PythonFacts {
    match ask_python(venv, None) {
        Answer::Facts(facts, _) => facts,
        Answer::Same => PythonFacts::default(),
    }
}

/// python3's facts, asked at most once. Where they are remembered (`remembering`), the facts
/// an earlier run found are used at once while python3 is asked again beside the run, which
/// then holds them to the answer (`confirm`) before anything it did with them counts:
/// asking costs 0.15-0.35 s (a pyenv shim alone forks some 15 times), which every run would
/// otherwise wait for before its plan, its work tree and its first test run. Asked again,
/// python3 is given the stamp of the remembered answer, and says only whether it still holds
/// unless it does not (`PYTHON_STAMP`).
#[derive(Default)]
pub struct AskedPython {
    facts: Option<PythonFacts>,
    /// The folder of remembered facts; None: python3 is asked, and waited for.
    remembered_in: Option<PathBuf>,
    /// The asking, beside, when remembered facts were used: the file they were read from.
    asking: Option<(PathBuf, std::thread::JoinHandle<Answer>)>,
}

/// Whether the facts a plan was made with are python3's.
#[derive(Debug, PartialEq, Eq)]
pub enum Confirmed {
    /// They are (or were asked, not remembered).
    Same,
    /// python3 answered otherwise: the plan must be made again, with what it answered.
    Changed,
}

impl AskedPython {
    /// Facts remembered in the user's cache (`$XDG_CACHE_HOME/agent-git`, else
    /// `~/.cache/agent-git`), where there is one.
    pub fn remembering() -> AskedPython {
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| {
                std::env::var_os("HOME")
                    .map(|home| PathBuf::from(home).join(".cache"))
                    .filter(|p| p.is_absolute())
            });
        AskedPython {
            facts: None,
            remembered_in: cache.map(|c| c.join("agent-git")),
            asking: None,
        }
    }

    fn facts(&mut self, venv: Option<&std::path::Path>) -> &PythonFacts {
        if self.facts.is_none() {
            let file = self
                .remembered_in
                .as_ref()
                .map(|dir| dir.join(facts_file(venv)));
            let remembered = file.as_deref().and_then(read_facts);
            self.facts = Some(match (remembered, file) {
                (Some(kept), Some(file)) => {
                    let venv = venv.map(std::path::Path::to_path_buf);
                    let stamp = kept.vouched_stamp();
                    let asking =
                        std::thread::spawn(move || ask_python(venv.as_deref(), stamp.as_deref()));
                    self.asking = Some((file, asking));
                    kept.facts
                }
                (_, file) => match ask_python(venv, None) {
                    Answer::Facts(facts, stamp) => {
                        if let Some(file) = file {
                            remember(&file, &facts, &stamp);
                        }
                        facts
                    }
                    Answer::Same => PythonFacts::default(),
                },
            });
        }
        self.facts.get_or_insert_with(PythonFacts::default)
    }

    /// Waits for python3's answer, where remembered facts were used, and takes it.
    pub fn confirm(&mut self) -> Confirmed {
        let Some((file, asking)) = self.asking.take() else {
            return Confirmed::Same;
        };
        let (answer, stamp) = match asking.join() {
            Ok(Answer::Same) => return Confirmed::Same,
            Ok(Answer::Facts(facts, stamp)) => (facts, stamp),
            Err(_) => (PythonFacts::default(), String::new()),
        };
        // Kept with the stamp they go with now, so that the next run is answered `same`.
        remember(&file, &answer, &stamp);
        if self.facts.as_ref() == Some(&answer) {
            return Confirmed::Same;
        }
        self.facts = Some(answer);
        Confirmed::Changed
    }
}

impl Drop for AskedPython {
    /// python3 asked beside a run that ends first (a plan that failed) is waited for: its
    /// empty folder goes with it.
    fn drop(&mut self) {
        if let Some((_, asking)) = self.asking.take() {
            let _ = asking.join();
        }
    }
}

/// Facts as a run keeps them for the next: with the stamp python3 gave them with, and a
/// digest of both as written.
#[derive(serde::Serialize, serde::Deserialize)]
struct Kept {
    #[serde(flatten)]
    facts: PythonFacts,
    #[serde(default)]
    stamp: String,
    #[serde(default)]
    digest: String,
}

impl Kept {
    fn digest_of(facts: &PythonFacts, stamp: &str) -> String {
        use std::hash::Hasher;
        let mut hasher = siphasher::sip::SipHasher13::new_with_keys(0, 0);
        let text = serde_json::to_string(facts).unwrap_or_default();
        for part in [text.as_str(), stamp] {
            hasher.write(part.as_bytes());
            hasher.write_u8(0);
        }
        format!("{:016x}", hasher.finish())
    }

    /// The stamp, where the facts are as they were written with it: facts edited by hand
    /// since are held to python3's whole answer, not to whether its stamp moved.
    fn vouched_stamp(&self) -> Option<String> {
        let vouched =
            !self.stamp.is_empty() && self.digest == Kept::digest_of(&self.facts, &self.stamp);
        vouched.then(|| self.stamp.clone())
    }
}

/// The file of the facts of the python3 that `venv`, else PATH, leads to (as far as the
/// environment says which one that is).
fn facts_file(venv: Option<&std::path::Path>) -> String {
    use std::hash::Hasher;
    let mut hasher = siphasher::sip::SipHasher13::new_with_keys(0, 0);
    hasher.write(format!("{venv:?}").as_bytes());
    for name in [
        "PATH",
        "PYENV_VERSION",
        "PYENV_ROOT",
        "CONDA_PREFIX",
        "UV_PYTHON",
    ] {
        hasher.write(format!("{name}={:?}\0", std::env::var_os(name)).as_bytes());
    }
    format!("python3-{:016x}.json", hasher.finish())
}

/// The facts in `file`, if it is a regular file of a sane size (no link, pipe or device is
/// read: a remembered answer costs a run time at most, never a hang).
fn read_facts(file: &std::path::Path) -> Option<Kept> {
    serde_json::from_slice(&crate::files::read_kept(file, 4 << 20)?).ok()
}

/// Keeps `facts` for the next run: written whole beside, then renamed into place, so that a
/// run reading them finds all or none. A cache that cannot be written costs only time.
fn remember(file: &std::path::Path, facts: &PythonFacts, stamp: &str) {
    let kept = Kept {
        facts: facts.clone(),
        stamp: stamp.to_string(),
        digest: Kept::digest_of(facts, stamp),
    };
    if let Ok(bytes) = serde_json::to_vec(&kept) {
        let _ = crate::files::keep(file, &bytes);
    }
}
