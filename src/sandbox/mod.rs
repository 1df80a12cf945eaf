//! How commands are confined: the model's run_command and the test command both run through
//! `agent-git sandbox-exec`, a helper that puts itself in a fresh network namespace (only its
//! own loopback), limits processes, file size and CPU time, allows writes only to the work tree
//! and a private temp dir (Landlock), then runs the command as init of a new PID namespace, so
//! that killing it ends every process it started.

pub mod helper;
mod process;

pub use process::{run_prepared, RawRun};

use std::ffi::OsString;
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
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "NODE_PATH",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    On,
    /// The user asked for no confinement; reports say so.
    Off,
}

/// Resource limits of one sandboxed command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub processes: u64,
    pub file_size_bytes: u64,
    pub cpu_seconds: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            processes: 512,
            file_size_bytes: 1 << 30,
            cpu_seconds: 600,
        }
    }
}

/// Which layers the helper enforces here; found by a probe at the start of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layers {
    pub network: Result<(), String>,
    pub filesystem: Result<(), String>,
    /// Everything but the writable dirs read-only (a mount namespace): metadata too.
    pub read_only: Result<(), String>,
    pub processes: Result<String, String>,
}

impl Layers {
    /// Whether a model's command may run: network and filesystem confinement both hold.
    pub fn confines(&self) -> bool {
        self.network.is_ok() && self.filesystem.is_ok()
    }
}

/// Where one confined command runs, what it may write, what it may not even read, and the
/// whole environment it sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jail {
    pub cwd: PathBuf,
    pub writable: Vec<PathBuf>,
    /// Absolute, canonical paths the command may not read (the user's checkout, the model's
    /// work tree and files), but for the `shown` paths inside them (a venv, say).
    pub hidden: Vec<PathBuf>,
    pub shown: Vec<PathBuf>,
    /// Paths inside the writable dirs that stay read-only (the tests, in the clean room).
    pub read_only: Vec<PathBuf>,
    pub env: Vec<(String, String)>,
}

pub struct Sandbox {
    mode: Mode,
    /// The agent-git binary whose `sandbox-exec` confines each command.
    helper: PathBuf,
    work: PathBuf,
    private: tempfile::TempDir,
    layers: Option<Layers>,
    limits: Limits,
    /// Directories the user made writable on purpose (`--allow-write`).
    allow_write: Vec<PathBuf>,
}

/// What the helper is told, as its argv after `sandbox-exec`. Built as a pure value so that
/// the exact confinement of a command can be checked by equality.
pub fn helper_args(jail: &Jail, limits: &Limits, layers: &Layers) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["sandbox-exec".into()];
    for (flag, dirs) in [
        ("--write", &jail.writable),
        ("--hide", &jail.hidden),
        ("--show", &jail.shown),
        ("--read-only", &jail.read_only),
    ] {
        for dir in dirs {
            args.push(flag.into());
            args.push(dir.into());
        }
    }
    for (flag, value) in [
        ("--max-processes", limits.processes),
        ("--max-file-size", limits.file_size_bytes),
        ("--max-cpu", limits.cpu_seconds),
    ] {
        args.push(flag.into());
        args.push(value.to_string().into());
    }
    for (holds, flag) in [
        (layers.network.is_ok(), "--no-network-isolation"),
        (layers.filesystem.is_ok(), "--no-landlock"),
        (layers.read_only.is_ok(), "--no-read-only-rest"),
    ] {
        if !holds {
            args.push(flag.into());
        }
    }
    args
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

impl Sandbox {
    /// Makes the private HOME and TMPDIR of the model's commands and, when on, probes which
    /// layers hold here. `helper` is the agent-git binary (`std::env::current_exe()` when this
    /// process is agent-git itself).
    pub fn start(
        mode: Mode,
        helper: PathBuf,
        work: &Path,
        limits: Limits,
        allow_write: Vec<PathBuf>,
    ) -> std::io::Result<Sandbox> {
        let private = tempfile::Builder::new()
            .prefix("agent-git-sandbox-")
            .tempdir()?;
        std::fs::create_dir(private.path().join("home"))?;
        std::fs::create_dir(private.path().join("tmp"))?;
        let mut sandbox = Sandbox {
            mode,
            helper,
            work: work.to_path_buf(),
            private,
            layers: None,
            limits,
            allow_write,
        };
        if mode == Mode::On {
            sandbox.layers = Some(sandbox.probe()?);
        }
        Ok(sandbox)
    }

    fn probe(&self) -> std::io::Result<Layers> {
        let jail = self.model_jail();
        let every_layer = Layers {
            network: Ok(()),
            filesystem: Ok(()),
            read_only: Ok(()),
            processes: Ok(String::new()),
        };
        let child = Command::new(&self.helper)
            .args(helper_args(&jail, &self.limits, &every_layer))
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
        let private = self.private.path();
        let mut writable = vec![self.work.clone(), private.to_path_buf()];
        writable.extend(self.allow_write.iter().cloned());
        Jail {
            cwd: self.work.clone(),
            writable,
            hidden: Vec::new(),
            shown: Vec::new(),
            read_only: Vec::new(),
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
        self.private.path()
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
        // CPU time can only be spent within the wall-clock limit, plus a margin.
        let cpu = timeout.as_secs().saturating_add(5);
        let command = self.command(jail, shell, cpu)?;
        let raw = run_prepared(command, timeout, interrupt, waiting)?;
        if self.layers.is_some() {
            helper::remove_cgroup(raw.pid);
        }
        Ok(raw)
    }

    /// One line for the start of a run and its report.
    pub fn describe(&self) -> String {
        describe(self.layers.as_ref(), &self.allow_write)
    }

    /// Why the model's commands may not run here, if they may not.
    pub fn refusal(&self) -> Option<String> {
        refusal(self.mode, self.layers.as_ref())
    }

    /// `sh -c shell` in the jail, confined as far as this machine allows.
    pub fn command(&self, jail: &Jail, shell: &str, cpu_seconds: u64) -> std::io::Result<Command> {
        let mut command = match &self.layers {
            None => {
                let mut c = Command::new("sh");
                c.arg("-c").arg(shell);
                c
            }
            Some(layers) => {
                let limits = Limits {
                    cpu_seconds,
                    ..self.limits
                };
                let mut c = Command::new(&self.helper);
                c.args(helper_args(jail, &limits, layers))
                    .arg("--")
                    .args(["sh", "-c", shell]);
                c
            }
        };
        command
            .current_dir(&jail.cwd)
            .env_clear()
            .envs(jail.env.iter().map(|(k, v)| (k, v)));
        Ok(command)
    }
}

/// One line for the start of a run and its report: which layers hold, or that none was asked,
/// and which directories the user made writable.
pub fn describe(layers: Option<&Layers>, allow_write: &[PathBuf]) -> String {
    let mut line = match layers {
        None => "off (--sandbox off): commands and tests ran unconfined, with the allowlisted \
                 environment"
            .to_string(),
        Some(layers) => describe_layers(layers),
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

fn describe_layers(layers: &Layers) -> String {
    let part = |r: &Result<(), String>, ok: &str, what: &str| match r {
        Ok(()) => ok.to_string(),
        Err(e) => format!("{what} NOT confined ({e})"),
    };
    let processes = match &layers.processes {
        Ok(how) => format!("processes limited ({how})"),
        Err(e) => format!("processes NOT limited ({e})"),
    };
    format!(
        "{}; {}; {}; {processes}",
        part(&layers.network, "no network (own loopback only)", "network"),
        part(
            &layers.filesystem,
            "writes only in the work tree and a private temp dir, and tests cannot read the \
             checkout or the model's files (Landlock)",
            "writes"
        ),
        part(
            &layers.read_only,
            "all else read-only, the tests too while they run (mount namespace)",
            "the rest of the filesystem"
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
    fn helper_args_state_the_whole_confinement() {
        let jail = Jail {
            cwd: PathBuf::from("/w"),
            writable: vec![PathBuf::from("/w"), PathBuf::from("/p")],
            hidden: vec![PathBuf::from("/repo")],
            shown: vec![PathBuf::from("/repo/.venv")],
            read_only: vec![PathBuf::from("/w/tests")],
            env: vec![],
        };
        let layers = Layers {
            network: Ok(()),
            filesystem: Err("Landlock: not supported".into()),
            read_only: Err("EPERM".into()),
            processes: Ok("cgroup".into()),
        };
        let args = helper_args(&jail, &Limits::default(), &layers);
        let args: Vec<&str> = args.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            args,
            vec![
                "sandbox-exec",
                "--write",
                "/w",
                "--write",
                "/p",
                "--hide",
                "/repo",
                "--show",
                "/repo/.venv",
                "--read-only",
                "/w/tests",
                "--max-processes",
                "512",
                "--max-file-size",
                "1073741824",
                "--max-cpu",
                "600",
                "--no-landlock",
                "--no-read-only-rest"
            ]
        );
    }

    #[test]
    fn commands_are_refused_unless_network_and_writes_are_confined() {
        let layers = |network: Result<(), String>, filesystem: Result<(), String>| Layers {
            network,
            filesystem,
            read_only: Ok(()),
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
        assert_eq!(
            describe(Some(&full), &[PathBuf::from("/cache")]),
            "no network (own loopback only); writes only in the work tree and a private temp dir, \
             and tests cannot read the checkout or the model's files (Landlock); all else \
             read-only, the tests too while they run (mount namespace); processes NOT limited \
             (no cgroup); also writable on request: /cache"
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
}
