//! How commands are confined: the model's run_command and the test command both run through
//! `agent-git sandbox-exec`, a helper that puts itself in a fresh network namespace (only its
//! own loopback), limits processes, file size and CPU time, allows writes only to the work tree
//! and a private temp dir (Landlock), then runs the command as init of a new PID namespace, so
//! that killing it ends every process it started.

pub mod helper;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Environment variables a sandboxed command may see, besides HOME and TMPDIR (private) and
/// PYTHONDONTWRITEBYTECODE. Nothing that could hold a secret.
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
    pub processes: Result<String, String>,
}

impl Layers {
    /// Whether a model's command may run: network and filesystem confinement both hold.
    pub fn confines(&self) -> bool {
        self.network.is_ok() && self.filesystem.is_ok()
    }
}

pub struct Sandbox {
    mode: Mode,
    work: PathBuf,
    private: tempfile::TempDir,
    layers: Option<Layers>,
    limits: Limits,
}

/// What the helper is told, as its argv after `sandbox-exec`. Built as a pure value so that
/// the exact confinement of a command can be checked by equality.
pub fn helper_args(
    work: &Path,
    private: &Path,
    limits: &Limits,
    network: bool,
    filesystem: bool,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        "sandbox-exec".into(),
        "--work".into(),
        work.into(),
        "--private".into(),
        private.into(),
        "--max-processes".into(),
        limits.processes.to_string().into(),
        "--max-file-size".into(),
        limits.file_size_bytes.to_string().into(),
        "--max-cpu".into(),
        limits.cpu_seconds.to_string().into(),
    ];
    if !network {
        args.push("--no-network-isolation".into());
    }
    if !filesystem {
        args.push("--no-landlock".into());
    }
    args
}

/// The environment of a sandboxed command: the allowlisted variables of `vars` and the
/// harness's own.
pub fn sandbox_env(
    vars: impl IntoIterator<Item = (String, String)>,
    private: &Path,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vars
        .into_iter()
        .filter(|(name, _)| ENV_ALLOWLIST.contains(&name.as_str()))
        .collect();
    env.push(("HOME".into(), private.join("home").display().to_string()));
    env.push(("TMPDIR".into(), private.join("tmp").display().to_string()));
    env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
    env.sort();
    env
}

impl Sandbox {
    /// Makes the private HOME and TMPDIR and, when on, probes which layers hold here.
    pub fn start(mode: Mode, work: &Path, limits: Limits) -> std::io::Result<Sandbox> {
        let private = tempfile::Builder::new()
            .prefix("agent-git-sandbox-")
            .tempdir()?;
        std::fs::create_dir(private.path().join("home"))?;
        std::fs::create_dir(private.path().join("tmp"))?;
        let mut sandbox = Sandbox {
            mode,
            work: work.to_path_buf(),
            private,
            layers: None,
            limits,
        };
        if mode == Mode::On {
            sandbox.layers = Some(sandbox.probe()?);
        }
        Ok(sandbox)
    }

    fn probe(&self) -> std::io::Result<Layers> {
        let child = Command::new(std::env::current_exe()?)
            .args(helper_args(
                &self.work,
                self.private.path(),
                &self.limits,
                true,
                true,
            ))
            .arg("--probe")
            .env_clear()
            .envs(self.env())
            .current_dir(&self.work)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        let pid = child.id();
        let out = child.wait_with_output()?;
        helper::remove_cgroup(pid);
        Ok(helper::parse_probe(&String::from_utf8_lossy(&out.stdout)))
    }

    pub fn work_dir(&self) -> &Path {
        &self.work
    }

    /// Runs `shell` confined, kills it all at the timeout or on interrupt, and clears up after.
    pub fn run(
        &self,
        shell: &str,
        timeout: std::time::Duration,
        interrupt: &std::sync::atomic::AtomicBool,
    ) -> std::io::Result<crate::testrun::RawRun> {
        // CPU time can only be spent within the wall-clock limit, plus a margin.
        let cpu = timeout.as_secs().saturating_add(5);
        let raw = crate::testrun::run_prepared(self.command(shell, cpu)?, timeout, interrupt)?;
        if self.layers.is_some() {
            helper::remove_cgroup(raw.pid);
        }
        Ok(raw)
    }

    pub fn env(&self) -> Vec<(String, String)> {
        sandbox_env(std::env::vars(), self.private.path())
    }

    /// One line for the start of a run and its report.
    pub fn describe(&self) -> String {
        describe(self.layers.as_ref())
    }

    /// Why the model's commands may not run here, if they may not.
    pub fn refusal(&self) -> Option<String> {
        refusal(self.mode, self.layers.as_ref())
    }

    /// `sh -c shell` in the work tree, confined as far as this machine allows.
    pub fn command(&self, shell: &str, cpu_seconds: u64) -> std::io::Result<Command> {
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
                let mut c = Command::new(std::env::current_exe()?);
                c.args(helper_args(
                    &self.work,
                    self.private.path(),
                    &limits,
                    layers.network.is_ok(),
                    layers.filesystem.is_ok(),
                ))
                .arg("--")
                .args(["sh", "-c", shell]);
                c
            }
        };
        command.current_dir(&self.work).env_clear().envs(self.env());
        Ok(command)
    }
}

/// One line for the start of a run and its report: which layers hold, or that none was asked.
pub fn describe(layers: Option<&Layers>) -> String {
    let Some(layers) = layers else {
        return "off (--sandbox off): commands and tests ran unconfined, with the allowlisted \
                environment"
            .into();
    };
    let part = |r: &Result<(), String>, ok: &str, what: &str| match r {
        Ok(()) => ok.to_string(),
        Err(e) => format!("{what} NOT confined ({e})"),
    };
    let processes = match &layers.processes {
        Ok(how) => format!("processes limited ({how})"),
        Err(e) => format!("processes NOT limited ({e})"),
    };
    format!(
        "{}; {}; {processes}",
        part(&layers.network, "no network (own loopback only)", "network"),
        part(
            &layers.filesystem,
            "writes only in the work tree and a private temp dir (Landlock)",
            "writes"
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
            describe(layers)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_args_state_the_whole_confinement() {
        let args = helper_args(
            Path::new("/w"),
            Path::new("/p"),
            &Limits::default(),
            true,
            false,
        );
        let args: Vec<&str> = args.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            args,
            vec![
                "sandbox-exec",
                "--work",
                "/w",
                "--private",
                "/p",
                "--max-processes",
                "512",
                "--max-file-size",
                "1073741824",
                "--max-cpu",
                "600",
                "--no-landlock"
            ]
        );
    }

    #[test]
    fn commands_are_refused_unless_network_and_writes_are_confined() {
        let layers = |network: Result<(), String>, filesystem: Result<(), String>| Layers {
            network,
            filesystem,
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
        assert!(describe(None).starts_with("off (--sandbox off)"));
        assert_eq!(
            describe(Some(&full)),
            "no network (own loopback only); writes only in the work tree and a private temp dir \
             (Landlock); processes NOT limited (no cgroup)"
        );
    }

    #[test]
    fn the_environment_is_an_allowlist() {
        let env = sandbox_env(
            [
                ("PATH".to_string(), "/bin".to_string()),
                ("ANTHROPIC_API_KEY".to_string(), "sk".to_string()),
                ("HOME".to_string(), "/root".to_string()),
                ("SSH_AUTH_SOCK".to_string(), "/s".to_string()),
                ("GIT_DIR".to_string(), "/r/.git".to_string()),
            ],
            Path::new("/p"),
        );
        assert_eq!(
            env,
            vec![
                ("HOME".to_string(), "/p/home".to_string()),
                ("PATH".to_string(), "/bin".to_string()),
                ("PYTHONDONTWRITEBYTECODE".to_string(), "1".to_string()),
                ("TMPDIR".to_string(), "/p/tmp".to_string()),
            ]
        );
    }
}
