//! How commands are confined: the model's run_command and the test command both run through
//! `agent-git sandbox-exec`, a helper that puts itself in a fresh network namespace (only its
//! own loopback), limits processes, file size and CPU time, allows writes only to the work tree
//! and a private temp dir (Landlock), then runs the command as init of a new PID namespace, so
//! that killing it ends every process it started.

pub mod helper;
mod process;

pub use helper::{OVERLAY_HELD, OVERLAY_UPPER};
pub use process::{die_with, run_prepared, ExitWatch, RawRun};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Environment variables a sandboxed command may see, besides the ones the harness sets (HOME,
/// TMPDIR, PYTHONDONTWRITEBYTECODE and those of a test run). Nothing that could hold a secret.
pub const ENV_ALLOWLIST: &[&str] = &[
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TERM",
    "TZ",
    "USER",
    "LOGNAME",
    "SHELL",
    "JAVA_HOME",
    "GOROOT",
    "GOPATH",
    "GOFLAGS",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "CARGO_HOME",
    "GOMODCACHE",
    "GOCACHE",
    "VIRTUAL_ENV",
    "PYENV_ROOT",
    "PYENV_VERSION",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "PYTHONPATH",
    "NVM_DIR",
    "NVM_BIN",
    "NODE_PATH",
];

/// Variables that name where a toolchain lives: what they name is bound back where the
/// sandbox mounts something fresh (a venv under /tmp, say).
const TOOLCHAIN_DIRS: &[&str] = &[
    "HOME",
    "JAVA_HOME",
    "GOROOT",
    "GOPATH",
    "GOMODCACHE",
    "GOCACHE",
    "RUSTUP_HOME",
    "CARGO_HOME",
    "VIRTUAL_ENV",
    "PYENV_ROOT",
    "CONDA_PREFIX",
    "NVM_DIR",
    "NVM_BIN",
];

/// Told to toolchains when the network is off, so they work from their caches instead of
/// failing on a fetch. A value the user set wins.
pub const OFFLINE_ENV: &[(&str, &str)] = &[
    ("CARGO_NET_OFFLINE", "true"),
    ("PIP_NO_INDEX", "1"),
    ("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
    ("UV_OFFLINE", "1"),
    ("npm_config_offline", "true"),
    // No GOFLAGS: Go's own choice of module mode (vendor/ where the project vendors) is what a
    // fresh checkout's `go test ./...` uses; `-mod=mod` would ignore a protected vendor/.
    ("GOPROXY", "off"),
];

/// What under HOME holds credentials: covered, so no command reads a key and prints it into
/// the conversation. Relative to HOME.
pub const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".pypirc",
    ".npmrc",
    ".yarnrc.yml",
    ".pgpass",
    ".my.cnf",
    ".vault-token",
    ".terraform.d",
    ".password-store",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".local/share/uv/credentials",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".gem/credentials",
    ".config/gh",
    ".config/hub",
    ".config/gcloud",
    ".config/op",
    ".claude",
    ".local/share/keyrings",
    // Where keys are exported for the shell, or kept for a provider's own tools.
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".config/fish",
    ".env",
    ".config/anthropic",
    ".config/openai",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
];

/// What of the user's HOME the model's commands and the tests see: the homes, installs and
/// caches of toolchains, relative to HOME. Everything else there is empty (a folder) or reads
/// as empty (a file), so a credential file of a tool nobody listed is not read either;
/// `--allow-read DIR` adds a path. The global git config is seen as a copy of its harmless
/// settings (`GIT_CONFIG_GLOBAL`). Credentials inside these (`HOME_SECRETS`) stay covered.
pub const HOME_SEEN: &[&str] = &[
    ".rustup",
    ".cargo",
    ".pyenv",
    ".nvm",
    ".volta",
    ".bun",
    ".deno",
    ".elan",
    ".ghcup",
    ".sdkman",
    ".jdks",
    "go",
    ".cache/go-build",
    ".cache/pip",
    ".cache/uv",
    ".local/share/uv",
    ".cache/pypoetry/cache",
    ".cache/pypoetry/artifacts",
    ".cache/pre-commit",
    ".npm/_cacache",
    ".cache/yarn",
    ".yarn/berry/cache",
    ".cache/pnpm",
    ".local/share/pnpm",
    ".cache/node-gyp",
    ".cache/ms-playwright",
    ".cache/Cypress",
    ".m2/repository",
    ".gradle/caches",
    ".gradle/wrapper",
    ".local/bin",
    ".local/lib",
    // Version managers and tool installers whose shims on PATH run what they installed here.
    ".asdf",
    ".local/share/mise",
    ".local/share/rtx",
    ".local/share/fnm",
    ".fnm",
    ".local/share/pipx",
    ".local/pipx",
    ".local/share/pypoetry",
    ".pixi",
    ".conda/pkgs",
    ".conda/envs",
    "miniconda3",
    "miniforge3",
    "anaconda3",
];

/// The settings of the user's global git config that tests and commands are given (as a copy
/// of their own): who commits, and how files are checked out. No credential helper, URL
/// rewrite, header or token.
const GIT_SETTINGS_SEEN: &[&str] = &[
    "user.name",
    "user.email",
    "init.defaultbranch",
    "core.autocrlf",
    "core.eol",
    "core.quotepath",
    "safe.directory",
];

/// Credentials that a toolchain variable moves out of HOME: relative to what it names.
const MOVED_SECRETS: &[(&str, &str)] = &[
    ("CARGO_HOME", "credentials"),
    ("CARGO_HOME", "credentials.toml"),
    ("GNUPGHOME", ""),
    ("DOCKER_CONFIG", ""),
    ("KUBECONFIG", ""),
    ("XDG_CONFIG_HOME", "gh"),
    ("XDG_CONFIG_HOME", "git/credentials"),
    // Nothing of the config folder is among what toolchains need (HOME_SEEN), wherever the
    // variable moved it; the global git config is given as a copy.
    ("XDG_CONFIG_HOME", ""),
    ("GIT_CONFIG_GLOBAL", ""),
    ("XDG_DATA_HOME", "uv/credentials"),
    ("UV_CREDENTIALS_DIR", ""),
];

/// Cargo's config files, which may hold a registry token (`[registry] token`): covered when
/// one does. Relative to CARGO_HOME (by default `~/.cargo`).
const CARGO_CONFIGS: &[&str] = &["config", "config.toml"];

/// Whether the model's commands and the tests are confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Confined as far as the machine allows; a model's command runs only where network and
    /// filesystem confinement both hold.
    On,
    /// The user asked for no confinement; reports say so.
    Off,
}

/// Resource limits of one sandboxed command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most processes the command may have at once; 512 by default.
    pub processes: u64,
    /// The largest file it may write; 1 GiB by default.
    pub file_size_bytes: u64,
    /// CPU seconds each process may use; 600 by default.
    pub cpu_seconds: u64,
    /// Wall-clock seconds after which the helper ends the command itself, a backstop to
    /// agent-git's own timeout.
    pub wall_seconds: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            processes: 512,
            file_size_bytes: 1 << 30,
            cpu_seconds: 600,
            wall_seconds: None,
        }
    }
}

/// Which layers the helper enforces here; found by a probe at the start of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layers {
    /// No network but a loopback of the command's own; Err says why not.
    pub network: Result<(), String>,
    /// Writes only in the writable dirs, hidden paths unreadable (Landlock); Err says why not.
    pub filesystem: Result<(), String>,
    /// Everything but the writable dirs read-only (a mount namespace): metadata too.
    pub read_only: Result<(), String>,
    /// HOME as the user has it, read-only, with the run's writes in an overlay.
    pub home: Result<(), String>,
    /// A /proc of the command's own: no other process's environment or command line.
    pub proc: Result<(), String>,
    /// The process limit held; Ok says how (`cgroup`), Err why not.
    pub processes: Result<String, String>,
}

impl Layers {
    /// Every layer held: what the probe asks the helper for.
    pub fn every_one() -> Self {
        Layers {
            network: Ok(()),
            filesystem: Ok(()),
            read_only: Ok(()),
            home: Ok(()),
            proc: Ok(()),
            processes: Ok(String::new()),
        }
    }

    /// Whether a model's command may run: network and filesystem confinement both hold.
    pub fn confines(&self) -> bool {
        self.network.is_ok() && self.filesystem.is_ok()
    }
}

/// Where one confined command runs, what it may write, what it may not even read, and the
/// whole environment it sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jail {
    /// Where the command starts.
    pub cwd: PathBuf,
    /// Directories the command may write; everything else is read-only where the layers hold.
    pub writable: Vec<PathBuf>,
    /// Absolute, canonical paths the command may not read (the user's checkout, the model's
    /// work tree and files), but for the `shown` paths inside them (a venv, say).
    pub hidden: Vec<PathBuf>,
    /// Paths inside `hidden` ones the command may read all the same.
    pub shown: Vec<PathBuf>,
    /// Paths inside the writable dirs that stay read-only (the tests, in the clean room).
    pub read_only: Vec<PathBuf>,
    /// Paths the command must find although they lie where it gets a fresh, empty directory
    /// (under /tmp): the toolchains its environment names are added to these.
    pub keep: Vec<PathBuf>,
    /// The real HOME, seen read-only, with writes going to an overlay in the private HOME
    /// the environment names; set when the sandbox can.
    pub home_overlay: Option<helper::HomeOverlay>,
    /// For a test run: the clean room's tree under an overlay, where the sandbox can.
    pub tree_overlay: Option<helper::TreeOverlay>,
    /// The whole environment, as names and values: the command inherits nothing else.
    pub env: Vec<(String, String)>,
}

/// Starts a run's confined commands: knows the layers this machine enforces, the helper that
/// enforces them, and the run's private dirs (removed when it is dropped).
pub struct Sandbox {
    mode: Mode,
    /// The agent-git binary whose `sandbox-exec` confines each command.
    helper: PathBuf,
    work: PathBuf,
    private: tempfile::TempDir,
    /// Its path with every link resolved: what the sandbox compares with the dirs it
    /// makes fresh (a TMPDIR that links into /tmp is /tmp).
    private_root: PathBuf,
    /// Marks the private dir as this run's while it lives (see `leftovers`).
    _lease: crate::leftovers::Lease,
    layers: Option<Layers>,
    limits: Limits,
    /// Directories the user made writable on purpose (`--allow-write`).
    allow_write: Vec<PathBuf>,
    /// What the model's commands read wherever it lies (the repository's git dir, for `git
    /// log`), though a fresh /tmp would hide it.
    readable: Vec<PathBuf>,
    /// What no command may read though it lies in what they can: a git config that holds a
    /// token, say.
    hidden: Vec<PathBuf>,
    /// agent-git's own HOME, which commands see read-only where the sandbox can.
    real_home: Option<PathBuf>,
    /// The copy of the global git config's harmless settings that commands are given.
    git_config: PathBuf,
    /// What the user let commands read (`--allow-read`): bound back wherever it lies.
    allow_read: Vec<PathBuf>,
    /// How long confined processes ran, in microseconds: time that is not the harness's own.
    busy_micros: std::sync::atomic::AtomicU64,
}

/// What the helper enforces for a command in `jail`, with the layers that hold here asked of
/// it. Built as a pure value, with named fields, so that the exact confinement of a command
/// can be checked by equality and crosses to the helper whole.
pub fn policy(jail: &Jail, limits: &Limits, layers: &Layers) -> helper::Policy {
    helper::Policy {
        writable: jail.writable.clone(),
        hidden: jail.hidden.clone(),
        shown: jail.shown.clone(),
        read_only: jail.read_only.clone(),
        keep: jail.keep.clone(),
        home: jail.home_overlay.clone(),
        tree: jail.tree_overlay.clone(),
        read_only_rest: layers.read_only.is_ok(),
        fresh_proc: layers.proc.is_ok(),
        max_processes: limits.processes,
        max_file_size: limits.file_size_bytes,
        max_cpu: limits.cpu_seconds,
        max_wall: limits.wall_seconds,
        network: layers.network.is_ok(),
        landlock: layers.filesystem.is_ok(),
        probe: false,
        command: Vec::new(),
    }
}

/// The environment of a sandboxed command: the allowlisted variables of `vars` (PATH without
/// the entries a repository could fill), the toolchain homes that a private HOME would hide,
/// HOME and TMPDIR as given, and `extra`, which wins over everything.
pub fn sandbox_env(
    vars: impl IntoIterator<Item = (String, String)>,
    home: &Path,
    tmp: &Path,
    extra: &[(String, String)],
) -> Vec<(String, String)> {
    let vars: Vec<(String, String)> = vars.into_iter().collect();
    let get = |name: &str| vars.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    let mut env: Vec<(String, String)> = vars
        .iter()
        .filter(|(name, _)| ENV_ALLOWLIST.contains(&name.as_str()))
        .map(|(name, value)| match name.as_str() {
            "PATH" => (name.clone(), absolute_path_entries(value)),
            _ => (name.clone(), value.clone()),
        })
        .collect();
    // rustup and cargo find their toolchains under the real HOME unless told where.
    if let Some(real_home) = get("HOME").filter(|h| h.starts_with('/')) {
        for (name, dir) in [("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo")] {
            if get(name).is_none() {
                env.push((
                    name.into(),
                    format!("{}/{dir}", real_home.trim_end_matches('/')),
                ));
            }
        }
    }
    env.push(("HOME".into(), home.display().to_string()));
    env.push(("TMPDIR".into(), tmp.display().to_string()));
    env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
    for (name, value) in extra {
        env.retain(|(n, _)| n != name);
        env.push((name.clone(), value.clone()));
    }
    env.sort();
    env
}

/// A jail as the helper gets it: what the environment names as toolchains kept in view,
/// and, where the sandbox can, HOME the user's own (read-only, writes going to an overlay in
/// the jail's private HOME); with the network off, the toolchains told so.
pub fn complete(mut jail: Jail, layers: &Layers, real_home: Option<&Path>) -> Jail {
    let real_home = real_home.filter(|h| h.is_absolute() && h.parent().is_some());
    let get = |env: &[(String, String)], name: &str| {
        env.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
    };
    if let (Ok(()), Some(real), Some(private)) = (&layers.home, real_home, get(&jail.env, "HOME")) {
        // Beside the private HOME, not in it: the commands may write there, and the overlay's
        // own folders must be out of their reach (a link planted for its work dir would have
        // the kernel clear whatever folder it led to).
        jail.home_overlay = Some(helper::HomeOverlay {
            home: real.to_path_buf(),
            upper: Path::new(&private).with_file_name("home-layer"),
        });
        jail.env.retain(|(n, _)| n != "HOME");
        jail.env.push(("HOME".into(), real.display().to_string()));
    }
    let mut keep: Vec<PathBuf> = Vec::new();
    for (name, value) in &jail.env {
        let dirs: Vec<&str> = match name.as_str() {
            "PATH" | "PYTHONPATH" | "NODE_PATH" => value.split(':').collect(),
            _ if TOOLCHAIN_DIRS.contains(&name.as_str()) => vec![value.as_str()],
            _ => continue,
        };
        for dir in dirs.into_iter().filter(|d| d.starts_with('/')) {
            let dir = Path::new(dir);
            // A `bin` on PATH is a toolchain's (a venv's `lib` lies beside it): keep the root.
            let root = match (name.as_str(), dir.file_name().and_then(|n| n.to_str())) {
                ("PATH", Some("bin" | "sbin")) => dir.parent().unwrap_or(dir),
                _ => dir,
            };
            if root.parent().is_some() {
                keep.push(root.to_path_buf());
            }
        }
    }
    for path in keep {
        if !jail.keep.contains(&path) {
            jail.keep.push(path);
        }
    }
    if layers.network.is_ok() {
        for (name, value) in OFFLINE_ENV {
            if get(&jail.env, name).is_none() {
                jail.env.push((name.to_string(), value.to_string()));
            }
        }
    }
    jail.env.sort();
    jail
}

/// The credentials to cover: those under HOME, and where a toolchain variable of
/// `moved_from` (agent-git's own environment) moved them.
fn secret_paths(real_home: Option<&Path>, moved_from: &[(String, String)]) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = real_home
        .map(|real| {
            HOME_SECRETS
                .iter()
                .map(|secret| real.join(secret))
                .collect()
        })
        .unwrap_or_default();
    for (name, rel) in MOVED_SECRETS {
        let moved = moved_from
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str());
        // KUBECONFIG may list several files.
        for dir in moved.into_iter().flat_map(|v| v.split(':')) {
            // A variable that names HOME itself, or a folder above it, moves nothing out.
            let named = Path::new(dir);
            if real_home.is_some_and(|home| home.starts_with(named)) || dir == "/dev/null" {
                continue;
            }
            if dir.starts_with('/') {
                // Joined with nothing, a path would end in a slash and name no file.
                let path = match rel {
                    &"" => PathBuf::from(dir),
                    _ => Path::new(dir).join(rel),
                };
                if !paths.contains(&path) {
                    paths.push(path);
                }
            }
        }
    }
    let cargo_home = moved_from
        .iter()
        .find(|(n, _)| n == "CARGO_HOME")
        .map(|(_, v)| PathBuf::from(v))
        .or_else(|| real_home.map(|home| home.join(".cargo")));
    for config in cargo_home
        .iter()
        .flat_map(|dir| CARGO_CONFIGS.iter().map(|c| dir.join(c)))
    {
        let lower = std::fs::read_to_string(&config).map(|t| t.to_lowercase());
        if lower.is_ok_and(|t| t.contains("token")) && !paths.contains(&config) {
            paths.push(config);
        }
    }
    paths
}

/// What of `home` is covered: every entry that is not `seen`, nor in a seen path, nor a folder
/// on the way to one (whose other entries are covered in turn). Where a covered entry is a
/// link, what it leads to is covered too (the helper covers no link itself).
fn home_unseen(home: &Path, seen: &[PathBuf]) -> Vec<PathBuf> {
    fn walk(dir: &Path, seen: &[PathBuf], depth: usize, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if seen.iter().any(|s| path.starts_with(s)) {
                continue;
            }
            let on_the_way = seen.iter().any(|s| s.starts_with(&path));
            let kind = entry.file_type();
            if on_the_way && depth < 6 && kind.as_ref().is_ok_and(|k| k.is_dir()) {
                walk(&path, seen, depth + 1, out);
                continue;
            }
            if kind.is_ok_and(|k| k.is_symlink()) {
                if let Ok(real) = path.canonicalize() {
                    let leads_in = seen
                        .iter()
                        .any(|s| real.starts_with(s) || s.starts_with(&real));
                    if !leads_in {
                        out.push(real);
                    }
                }
            }
            out.push(path);
        }
    }
    let mut out = Vec::new();
    walk(home, seen, 0, &mut out);
    out.sort();
    out.dedup();
    out
}

/// The paths of `home` commands see: `HOME_SEEN`, the toolchains the environment `vars`
/// names there, and what the user allowed (`--allow-read`).
fn home_seen(home: &Path, vars: &[(String, String)], allow_read: &[PathBuf]) -> Vec<PathBuf> {
    let mut seen: Vec<PathBuf> = HOME_SEEN.iter().map(|rel| home.join(rel)).collect();
    for (name, value) in vars {
        if TOOLCHAIN_DIRS.contains(&name.as_str()) && name != "HOME" {
            seen.push(PathBuf::from(value));
        }
    }
    seen.extend(allow_read.iter().cloned());
    seen.extend(
        seen.clone()
            .iter()
            .filter_map(|p| p.canonicalize().ok())
            .collect::<Vec<_>>(),
    );
    seen.retain(|p| p.is_absolute() && p != home);
    seen
}

/// The harmless settings (`GIT_SETTINGS_SEEN`) of the user's global git config (the file of
/// `GIT_CONFIG_GLOBAL` when `vars` sets one, else `~/.config/git/config` and `~/.gitconfig`),
/// as the text of a config file of their own.
fn harmless_git_config(home: Option<&Path>, vars: &[(String, String)]) -> String {
    let var = |name: &str| vars.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    let files: Vec<PathBuf> = match var("GIT_CONFIG_GLOBAL") {
        Some(global) => vec![PathBuf::from(global)],
        None => {
            let xdg = var("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .or_else(|| home.map(|h| h.join(".config")));
            let xdg = xdg.map(|dir| dir.join("git").join("config"));
            xdg.into_iter()
                .chain(home.map(|h| h.join(".gitconfig")))
                .collect()
        }
    };
    // Each file opened once, in git's order (the later wins).
    let configs: Vec<git2::Config> = files
        .iter()
        .filter(|f| f.is_file())
        .filter_map(|f| git2::Config::open(f).ok())
        .collect();
    let mut values: Vec<(&str, Vec<String>)> = Vec::new();
    for key in GIT_SETTINGS_SEEN {
        let mut found = Vec::new();
        for config in &configs {
            let Ok(entries) = config.multivar(key, None) else {
                continue;
            };
            let _ = entries.for_each(|entry| {
                if let Ok(value) = entry.value() {
                    found.push(value.to_string());
                }
            });
        }
        if !found.is_empty() {
            values.push((key, found));
        }
    }
    let mut text = String::new();
    for (key, mut found) in values {
        let Some((section, name)) = key.split_once('.') else {
            continue;
        };
        // Single-valued keys: the last file's value wins, as in git.
        let kept = if key == "safe.directory" {
            found
        } else {
            found.split_off(found.len() - 1)
        };
        for value in kept {
            let quoted = value
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            text.push_str(&format!("[{section}]\n\t{name} = \"{quoted}\"\n"));
        }
    }
    text
}

/// Where the links inside the credential folders `hidden` lead (a `~/.ssh` whose key files
/// link into a dotfiles folder, one by one), a few levels down: to be hidden too.
fn link_targets(hidden: &[PathBuf]) -> Vec<PathBuf> {
    let mut targets = Vec::new();
    for dir in hidden.iter().filter(|h| h.is_dir()) {
        let walk = walkdir::WalkDir::new(dir).max_depth(3).follow_links(false);
        for entry in walk.into_iter().flatten().take(500) {
            if entry.path_is_symlink() {
                if let Ok(real) = entry.path().canonicalize() {
                    if !hidden.contains(&real) && !targets.contains(&real) {
                        targets.push(real);
                    }
                }
            }
        }
    }
    targets
}

/// Other runs' private dirs and clean rooms (lasting ones too) in `temp`, where a command
/// would see them: a temp dir that the sandbox does not make fresh (TMPDIR under HOME, say,
/// or a /tmp the user made writable, which the sandbox leaves as it is).
fn other_runs_dirs(temp: &Path, jail: &Jail) -> Vec<PathBuf> {
    let fresh = helper::PRIVATE_DIRS
        .iter()
        .filter(|(_, writable)| *writable);
    let made_fresh = fresh.map(|(dir, _)| Path::new(dir)).any(|dir| dir == temp);
    if made_fresh && !jail.writable.iter().any(|w| temp.starts_with(w)) {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(temp) else {
        return Vec::new();
    };
    let ours = |dir: &Path| {
        jail.writable
            .iter()
            .chain(&jail.keep)
            .chain(&jail.shown)
            .any(|p| p.starts_with(dir))
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            crate::leftovers::TEMP_PREFIXES
                .iter()
                .chain(&[crate::workspace::rooms::PREFIX])
                .any(|p| name.starts_with(p))
        })
        .map(|e| e.path())
        .filter(|dir| !ours(dir))
        .collect()
}

/// What to make readable so that everything under `root` is, but the `hidden` paths, except
/// the `shown` ones inside them: the siblings of every directory on the way to a hidden path,
/// down to it. Links are left out: what they lead to is reached by its own path, and a link
/// must not open a way into a hidden one.
pub fn readable_roots(root: &Path, hidden: &[PathBuf], shown: &[PathBuf]) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        if hidden.contains(&dir) {
            roots.extend(shown.iter().filter(|s| s.starts_with(&dir)).cloned());
            continue;
        }
        if !hidden.iter().any(|h| h.starts_with(&dir)) {
            roots.push(dir);
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => pending.push(entry.path()),
                Ok(kind) if !kind.is_symlink() && !hidden.contains(&entry.path()) => {
                    roots.push(entry.path())
                }
                _ => {}
            }
        }
    }
    roots.sort();
    roots
}

/// PATH without empty or relative entries: those name the current directory, which a model
/// could fill with a `python3` of its own.
fn absolute_path_entries(path: &str) -> String {
    path.split(':')
        .filter(|entry| entry.starts_with('/'))
        .collect::<Vec<_>>()
        .join(":")
}

/// What a sandbox's commands may reach beyond their work tree and private dirs, each by name.
#[derive(Debug, Clone, Default)]
pub struct Reach {
    /// Directories the user made writable on purpose (`--allow-write`).
    pub allow_write: Vec<PathBuf>,
    /// Paths under HOME the user let commands read (`--allow-read`), besides `HOME_SEEN`.
    pub allow_read: Vec<PathBuf>,
    /// What commands read wherever it lies (the repository's git dir, for `git log`), though
    /// a fresh /tmp would hide it.
    pub readable: Vec<PathBuf>,
    /// What no command may read though it lies in what they can: a git config that holds a
    /// token, say.
    pub hidden: Vec<PathBuf>,
}

impl Sandbox {
    /// Makes the private HOME and TMPDIR of the model's commands and, when on, probes which
    /// layers hold here. `helper` is the agent-git binary (`std::env::current_exe()` when this
    /// process is agent-git itself).
    pub fn start(
        mode: Mode,
        helper: PathBuf,
        work: &Path,
        limits: Limits,
        reach: Reach,
    ) -> std::io::Result<Sandbox> {
        let Reach {
            allow_write,
            allow_read,
            readable,
            hidden,
        } = reach;
        let private = tempfile::Builder::new()
            .prefix("agent-git-sandbox-")
            .tempdir()?;
        let lease = crate::leftovers::Lease::take(&private.path().join(crate::leftovers::LEASE))?;
        std::fs::create_dir(private.path().join("home"))?;
        std::fs::create_dir(private.path().join("tmp"))?;
        let real_home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .and_then(|h| h.canonicalize().ok());
        let vars: Vec<(String, String)> = std::env::vars().collect();
        let git_config = private.path().canonicalize()?.join("gitconfig");
        std::fs::write(
            &git_config,
            harmless_git_config(real_home.as_deref(), &vars),
        )?;
        let mut sandbox = Sandbox {
            mode,
            helper,
            work: work.to_path_buf(),
            private_root: private.path().canonicalize()?,
            private,
            _lease: lease,
            layers: None,
            limits,
            allow_write,
            readable,
            hidden: Vec::new(),
            real_home,
            git_config,
            allow_read: allow_read.clone(),
            busy_micros: std::sync::atomic::AtomicU64::new(0),
        };
        // Neither agent-git's environment nor the user's HOME changes during a run: what to
        // cover is found once (only in the credentials' folders do links count: a checkout's,
        // such as a venv's python, do not).
        let secrets = secret_paths(sandbox.real_home.as_deref(), &vars);
        let links = link_targets(&secrets);
        // A HOME of `/` (some containers) is no home to cover around.
        let unseen = sandbox
            .real_home
            .as_deref()
            .filter(|home| home.parent().is_some())
            .map(|home| home_unseen(home, &home_seen(home, &vars, &allow_read)))
            .unwrap_or_default();
        sandbox.hidden = [hidden, secrets, links, unseen].concat();
        if mode == Mode::On {
            sandbox.layers = Some(sandbox.probe()?);
        }
        Ok(sandbox)
    }

    fn probe(&self) -> std::io::Result<Layers> {
        let jail = self.model_jail();
        let every_layer = Layers::every_one();
        let jail = self.finish(jail, &every_layer);
        let child = self
            .helper_command(&policy(&jail, &self.limits, &every_layer))?
            .arg("--probe")
            .env_clear()
            .envs(jail.env)
            .current_dir(&jail.cwd)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        let pid = child.id();
        let out = child.wait_with_output()?;
        helper::remove_cgroup(pid);
        Ok(helper::parse_probe(&String::from_utf8_lossy(&out.stdout)))
    }

    /// Where the model's commands run: the work tree, writable with a private HOME and TMPDIR
    /// that last for the whole run.
    pub fn model_jail(&self) -> Jail {
        let private = self.private_root.as_path();
        // Not the private dir itself: its lease must stay out of the commands' reach.
        let mut writable = vec![self.work.clone(), private.join("home"), private.join("tmp")];
        writable.extend(self.allow_write.iter().cloned());
        Jail {
            cwd: self.work.clone(),
            writable,
            hidden: Vec::new(),
            shown: Vec::new(),
            read_only: Vec::new(),
            keep: self.readable.clone(),
            home_overlay: None,
            tree_overlay: None,
            env: sandbox_env(
                std::env::vars(),
                &private.join("home"),
                &private.join("tmp"),
                &[],
            ),
        }
    }

    /// The model's own HOME and TMPDIR live here.
    pub fn private_dir(&self) -> &Path {
        &self.private_root
    }

    /// The directories the user made writable on purpose.
    pub fn allowed_writes(&self) -> &[PathBuf] {
        &self.allow_write
    }

    /// Runs `shell` in `jail`, confined as far as this machine allows; kills it all at the
    /// timeout or on interrupt, and clears up after.
    pub fn run(
        &self,
        jail: &Jail,
        shell: &str,
        timeout: Duration,
        interrupt: &AtomicBool,
        waiting: &mut dyn FnMut(Duration),
    ) -> std::io::Result<RawRun> {
        // CPU time can only be spent within the wall-clock limit, plus a margin; the helper's
        // own clock stops the command a little after agent-git's would.
        let limits = Limits {
            cpu_seconds: timeout.as_secs().saturating_add(5),
            wall_seconds: Some(timeout.as_secs().saturating_add(10)),
            ..self.limits
        };
        let command = self.command(jail, shell, &limits)?;
        let started = std::time::Instant::now();
        let raw = run_prepared(command, timeout, interrupt, waiting)?;
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.busy_micros
            .fetch_add(micros, std::sync::atomic::Ordering::Relaxed);
        if self.layers.is_some() {
            helper::remove_cgroup(raw.pid);
        }
        Ok(raw)
    }

    /// Takes back what was counted twice in `busy`: the time two processes ran at once.
    pub fn counted_twice(&self, overlap: Duration) {
        let micros = u64::try_from(overlap.as_micros()).unwrap_or(u64::MAX);
        let relaxed = std::sync::atomic::Ordering::Relaxed;
        let _ = self
            .busy_micros
            .fetch_update(relaxed, relaxed, |busy| Some(busy.saturating_sub(micros)));
    }

    /// How long the processes it ran (tests, setup, commands, hooks) took, together.
    pub fn busy(&self) -> Duration {
        Duration::from_micros(self.busy_micros.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// One short line for the start of a run and its report: what holds in a few words, what
    /// does not in full.
    pub fn describe(&self) -> String {
        describe(self.layers.as_ref(), &self.allow_write)
    }

    /// The same line with how each layer holds (`fix -v`, `--json`).
    pub fn details(&self) -> String {
        describe_in(self.layers.as_ref(), &self.allow_write, Detail::Full)
    }

    /// Whether the model's commands run confined (the sandbox is on, and holds here): only
    /// then can nothing they do reach the clean room.
    pub fn confines(&self) -> bool {
        self.mode == Mode::On && self.layers.as_ref().is_some_and(Layers::confines)
    }

    /// Whether overlays mount here (HOME's did at the probe): a test run's overlay of its
    /// tree then holds as well, short of something in its way.
    pub fn mounts_overlays(&self) -> bool {
        self.confines() && self.layers.as_ref().is_some_and(|l| l.home.is_ok())
    }

    /// Why the model's commands may not run here, if they may not.
    pub fn refusal(&self) -> Option<String> {
        refusal(self.mode, self.layers.as_ref())
    }

    /// `jail` as the helper gets it (`complete`), with what no command may read: the
    /// credentials, and other runs' temp dirs where the sandbox leaves TMPDIR as it is.
    fn finish(&self, jail: Jail, layers: &Layers) -> Jail {
        let mut jail = complete(jail, layers, self.real_home.as_deref());
        let others = other_runs_dirs(&std::env::temp_dir(), &jail);
        jail.hidden.extend(others);
        jail.hidden.extend(self.hidden.iter().cloned());
        // git's global config is the copy of its harmless settings.
        jail.keep.push(self.git_config.clone());
        jail.keep.extend(self.allow_read.iter().cloned());
        jail.env.retain(|(name, _)| name != "GIT_CONFIG_GLOBAL");
        jail.env.push((
            "GIT_CONFIG_GLOBAL".into(),
            self.git_config.display().to_string(),
        ));
        jail.env.sort();
        jail
    }

    /// `agent-git sandbox-exec --policy-file FILE`: the policy written whole to a file of this
    /// sandbox's private dir (out of every command's reach), which the helper reads and
    /// removes. A file, not an argument: a long list of hidden paths outgrows an argument.
    fn helper_command(&self, policy: &helper::Policy) -> std::io::Result<Command> {
        let json = serde_json::to_vec(policy).map_err(std::io::Error::other)?;
        let mut file = tempfile::Builder::new()
            .prefix("policy-")
            .tempfile_in(&self.private_root)?;
        std::io::Write::write_all(&mut file, &json)?;
        let (_, path) = file.keep().map_err(|e| e.error)?;
        let mut command = Command::new(&self.helper);
        command.arg("sandbox-exec").arg("--policy-file").arg(path);
        Ok(command)
    }

    /// `sh -c shell` in the jail, confined as far as this machine allows.
    pub fn command(&self, jail: &Jail, shell: &str, limits: &Limits) -> std::io::Result<Command> {
        let (mut command, env) = match &self.layers {
            None => {
                let mut c = Command::new("sh");
                c.arg("-c").arg(shell);
                (c, jail.env.clone())
            }
            Some(layers) => {
                let jail = self.finish(jail.clone(), layers);
                let mut c = self.helper_command(&policy(&jail, limits, layers))?;
                c.arg("--").args(["sh", "-c", shell]);
                (c, jail.env)
            }
        };
        command.current_dir(&jail.cwd).env_clear().envs(env);
        Ok(command)
    }
}

impl Drop for Sandbox {
    /// The HOME overlay's work dir is unreadable as the kernel leaves it; the private dir
    /// goes all the same.
    fn drop(&mut self) {
        let _ = crate::leftovers::remove_forcibly(self.private.path());
    }
}

/// How much a description says of the layers that hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Detail {
    Short,
    Full,
}

/// One line for the start of a run and its report: which layers hold, or that none was asked,
/// and which directories the user made writable.
pub fn describe(layers: Option<&Layers>, allow_write: &[PathBuf]) -> String {
    describe_in(layers, allow_write, Detail::Short)
}

fn describe_in(layers: Option<&Layers>, allow_write: &[PathBuf], detail: Detail) -> String {
    let mut line = match layers {
        None => "off (--sandbox off): commands and tests ran unconfined, with the allowlisted \
                 environment"
            .to_string(),
        Some(layers) => describe_layers(layers, detail),
    };
    if !allow_write.is_empty() {
        let dirs: Vec<String> = allow_write
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        line.push_str(&format!("; also writable on request: {}", dirs.join(", ")));
    }
    line
}

fn describe_layers(layers: &Layers, detail: Detail) -> String {
    // What holds is said in its first words unless in full; what does not, always in full.
    let part = |r: &Result<(), String>, ok: &str, not: &str| match (r, detail) {
        (Ok(()), Detail::Full) => ok.to_string(),
        (Ok(()), Detail::Short) => ok.split(" (").next().unwrap_or(ok).to_string(),
        (Err(e), _) => format!("{not} ({e})"),
    };
    let processes = match (&layers.processes, detail) {
        (Ok(how), Detail::Full) => format!("processes limited ({how})"),
        (Ok(_), Detail::Short) => "processes limited".to_string(),
        (Err(e), _) => format!("processes NOT limited ({e})"),
    };
    format!(
        "{}; {}; {}; {}; {}; {processes}",
        part(
            &layers.network,
            "no network (own loopback only)",
            "network NOT confined"
        ),
        part(
            &layers.filesystem,
            "writes only in the work tree (and a private temp dir; tests cannot read the \
             checkout or the model's files; Landlock)",
            "writes NOT confined"
        ),
        part(
            &layers.read_only,
            "all else read-only (the tests too while they run, with /tmp, /run and /dev/shm \
             private and empty and credentials under HOME covered; mount namespace)",
            "the rest of the filesystem NOT confined"
        ),
        part(
            &layers.home,
            "HOME read-only with a writable overlay for the run",
            "HOME a private empty one, not the user's read-only"
        ),
        part(
            &layers.proc,
            "a /proc of its own (no other process visible)",
            "/proc NOT private"
        ),
    )
}

/// Why the model's commands may not run, if they may not: the sandbox is on but cannot
/// confine the network or the filesystem here.
pub fn refusal(mode: Mode, layers: Option<&Layers>) -> Option<String> {
    match (mode, layers) {
        (Mode::Off, _) => None,
        (Mode::On, Some(layers)) if layers.confines() => None,
        _ => Some(format!(
            "refused: the sandbox is not available on this machine ({}); run_command is \
             disabled unless the user passes --sandbox off",
            describe(layers, &[])
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_states_the_whole_confinement_and_crosses_whole() {
        let jail = Jail {
            cwd: PathBuf::from("/w"),
            writable: vec![PathBuf::from("/w"), PathBuf::from("/p")],
            hidden: vec![PathBuf::from("/repo")],
            shown: vec![PathBuf::from("/repo/.venv")],
            read_only: vec![PathBuf::from("/w/tests")],
            keep: vec![PathBuf::from("/tmp/venv")],
            home_overlay: Some(helper::HomeOverlay {
                home: PathBuf::from("/home/u"),
                upper: PathBuf::from("/p/home"),
            }),
            tree_overlay: Some(helper::TreeOverlay {
                tree: PathBuf::from("/w"),
                upper: PathBuf::from("/r/overlay"),
            }),
            env: vec![],
        };
        let layers = Layers {
            network: Ok(()),
            filesystem: Err("Landlock: not supported".into()),
            read_only: Err("EPERM".into()),
            home: Ok(()),
            proc: Err("EPERM".into()),
            processes: Ok("cgroup".into()),
        };
        let limits = Limits {
            wall_seconds: Some(70),
            ..Limits::default()
        };
        let policy = policy(&jail, &limits, &layers);
        let path = |p: &str| PathBuf::from(p);
        assert_eq!(
            policy,
            helper::Policy {
                writable: vec![path("/w"), path("/p")],
                hidden: vec![path("/repo")],
                shown: vec![path("/repo/.venv")],
                read_only: vec![path("/w/tests")],
                keep: vec![path("/tmp/venv")],
                home: Some(helper::HomeOverlay {
                    home: path("/home/u"),
                    upper: path("/p/home"),
                }),
                tree: Some(helper::TreeOverlay {
                    tree: path("/w"),
                    upper: path("/r/overlay"),
                }),
                read_only_rest: false,
                fresh_proc: false,
                max_processes: 512,
                max_file_size: 1 << 30,
                max_cpu: 600,
                max_wall: Some(70),
                network: true,
                landlock: false,
                probe: false,
                command: vec![],
            }
        );
        // It crosses to the helper whole, a path that is not UTF-8 too.
        use std::os::unix::ffi::OsStrExt;
        let latin = PathBuf::from(std::ffi::OsStr::from_bytes(b"/w/caf\xe9"));
        let crossing = helper::Policy {
            writable: vec![latin],
            ..policy.clone()
        };
        let json = serde_json::to_vec(&crossing).unwrap();
        assert_eq!(
            serde_json::from_slice::<helper::Policy>(&json).unwrap(),
            crossing
        );
    }

    #[test]
    fn commands_are_refused_unless_network_and_writes_are_confined() {
        let layers = |network: Result<(), String>, filesystem: Result<(), String>| Layers {
            network,
            filesystem,
            read_only: Ok(()),
            home: Err("EINVAL".into()),
            proc: Ok(()),
            processes: Err("no cgroup".into()),
        };
        let full = layers(Ok(()), Ok(()));
        assert_eq!(
            refusal(Mode::On, Some(&full)),
            None,
            "process limits alone do not block"
        );
        let no_landlock = layers(Ok(()), Err("Landlock: not supported".into()));
        let why = refusal(Mode::On, Some(&no_landlock)).unwrap();
        assert!(
            why.contains("writes NOT confined (Landlock: not supported)"),
            "{why}"
        );
        assert!(
            why.contains("unless the user passes --sandbox off"),
            "{why}"
        );
        let no_net = layers(Err("EPERM".into()), Ok(()));
        assert!(refusal(Mode::On, Some(&no_net)).is_some());
        assert_eq!(refusal(Mode::Off, None), None);
        assert!(describe(None, &[]).starts_with("off (--sandbox off)"));
        // Short: what holds in its first words, what does not in full.
        assert_eq!(
            describe(Some(&full), &[PathBuf::from("/cache")]),
            "no network; writes only in the work tree; all else read-only; HOME a private \
             empty one, not the user's read-only (EINVAL); a /proc of its own; processes NOT \
             limited (no cgroup); also writable on request: /cache"
        );
        assert_eq!(
            describe_in(Some(&full), &[], Detail::Full),
            "no network (own loopback only); writes only in the work tree (and a private temp \
             dir; tests cannot read the checkout or the model's files; Landlock); all else \
             read-only (the tests too while they run, with /tmp, /run and /dev/shm private and \
             empty and credentials under HOME covered; mount namespace); HOME a private \
             empty one, not the user's read-only (EINVAL); a /proc of its own (no other process \
             visible); processes NOT limited (no cgroup)"
        );
    }

    #[test]
    fn hidden_paths_stay_unreadable_but_for_what_is_shown() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for sub in [
            "usr/bin",
            "tmp/user/repo/.venv/bin",
            "tmp/user/repo/src",
            "tmp/other",
        ] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("tmp/user/notes.txt"), "").unwrap();
        std::os::unix::fs::symlink(root.join("tmp/user/repo"), root.join("tmp/link")).unwrap();
        let repo = root.join("tmp/user/repo");
        let roots = readable_roots(&root, std::slice::from_ref(&repo), &[repo.join(".venv")]);
        let shown: Vec<String> = roots
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        assert_eq!(
            shown,
            vec![
                "tmp/other",
                "tmp/user/notes.txt",
                "tmp/user/repo/.venv",
                "usr"
            ],
            "no link, no repository but its venv"
        );
        assert_eq!(readable_roots(&root, &[], &[]), vec![root.clone()]);
    }

    #[test]
    fn the_environment_is_an_allowlist() {
        let var = |k: &str, v: &str| (k.to_string(), v.to_string());
        let env = sandbox_env(
            [
                var("PATH", "/usr/bin::.:bin:/bin"),
                var("ANTHROPIC_API_KEY", "sk"),
                var("HOME", "/root"),
                var("SSH_AUTH_SOCK", "/s"),
                var("GIT_DIR", "/r/.git"),
                var("CARGO_HOME", "/opt/cargo"),
            ],
            Path::new("/p/home"),
            Path::new("/p/tmp"),
            &[var("PYTHONNOUSERSITE", "1"), var("HOME", "/q/home")],
        );
        assert_eq!(
            env,
            vec![
                var("CARGO_HOME", "/opt/cargo"),
                var("HOME", "/q/home"),
                var("PATH", "/usr/bin:/bin"),
                var("PYTHONDONTWRITEBYTECODE", "1"),
                var("PYTHONNOUSERSITE", "1"),
                var("RUSTUP_HOME", "/root/.rustup"),
                var("TMPDIR", "/p/tmp"),
            ]
        );
    }

    #[test]
    fn credentials_are_found_in_home_and_where_toolchains_moved_them() {
        let var = |k: &str, v: &str| (k.to_string(), v.to_string());
        let moved = [
            var("CARGO_HOME", "/usr/local/cargo"),
            var("KUBECONFIG", "/k/a:/k/b"),
        ];
        let secrets = secret_paths(Some(Path::new("/home/u")), &moved);
        for hidden in [
            "/home/u/.ssh",
            "/home/u/.cargo/credentials.toml",
            "/usr/local/cargo/credentials.toml",
            "/k/a",
            "/k/b",
        ] {
            assert!(secrets.contains(&PathBuf::from(hidden)), "{hidden}");
        }
    }

    #[test]
    fn a_completed_jail_keeps_toolchains_and_says_offline() {
        let var = |k: &str, v: &str| (k.to_string(), v.to_string());
        let jail = Jail {
            cwd: PathBuf::from("/w"),
            writable: vec![PathBuf::from("/w")],
            hidden: vec![],
            shown: vec![],
            read_only: vec![],
            keep: vec![PathBuf::from("/r/runner.py")],
            home_overlay: None,
            tree_overlay: None,
            env: vec![
                var("GOFLAGS", "-mod=vendor"),
                var("HOME", "/p/home"),
                var("PATH", "/tmp/venv/bin:/usr/bin:/bin:/"),
                var("VIRTUAL_ENV", "/tmp/venv"),
            ],
        };
        let every = Layers::every_one();
        let done = complete(jail.clone(), &every, Some(Path::new("/home/u")));
        assert_eq!(
            done.home_overlay,
            Some(helper::HomeOverlay {
                home: PathBuf::from("/home/u"),
                upper: PathBuf::from("/p/home-layer")
            })
        );
        let mut unset = jail.clone();
        unset.env.retain(|(name, _)| name != "GOFLAGS");
        let unset = complete(unset, &every, Some(Path::new("/home/u")));
        assert!(
            !unset.env.iter().any(|(n, _)| n == "GOFLAGS"),
            "Go picks the module mode the project uses"
        );
        let keep: Vec<&str> = done.keep.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(
            keep,
            vec!["/r/runner.py", "/tmp/venv", "/usr", "/home/u"],
            "a venv's root beside its bin, not / for /bin"
        );
        let names: Vec<&str> = done.env.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "CARGO_NET_OFFLINE",
                "GOFLAGS",
                "GOPROXY",
                "HOME",
                "PATH",
                "PIP_DISABLE_PIP_VERSION_CHECK",
                "PIP_NO_INDEX",
                "UV_OFFLINE",
                "VIRTUAL_ENV",
                "npm_config_offline"
            ]
        );
        assert!(
            done.env.contains(&var("GOFLAGS", "-mod=vendor")),
            "the user's own wins"
        );
        assert!(done.env.contains(&var("HOME", "/home/u")));
        // Without the overlay or the network layer: the private HOME, and no offline words.
        let bare = Layers {
            network: Err("EPERM".into()),
            home: Err("EPERM".into()),
            ..every
        };
        let done = complete(jail, &bare, Some(Path::new("/home/u")));
        assert_eq!(done.home_overlay, None);
        assert!(done.env.contains(&var("HOME", "/p/home")));
        assert!(!done.env.iter().any(|(n, _)| n == "CARGO_NET_OFFLINE"));
    }
}
