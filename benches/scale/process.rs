//! What waiting for a process costs: `sh -c true` run the way the harness runs every command
//! (its own session, output captured, a timeout), beside `Command::status`; and the same
//! through the sandbox, beside the plain run.

use crate::common::{self, Options, Repo, Stats};
use agent_git::sandbox::{run_prepared, Limits, Mode, Sandbox};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// How many processes each sample starts: one lasts about a millisecond, too short to time.
const BATCH: usize = 20;
const TIMEOUT: Duration = Duration::from_secs(60);

pub fn section(repo: &Repo, options: &Options) {
    println!("### process wait ({BATCH} processes a sample)");
    let never = AtomicBool::new(false);
    let mut harness = || {
        batch(&mut || {
            let raw = run_prepared(shell_true(), TIMEOUT, &never, &mut |_| {}).expect("runs");
            assert_eq!(raw.exit_code, Some(0));
        })
    };
    let mut floor = || batch(&mut || assert!(shell_true().status().expect("runs").success()));
    common::compare(
        "run_prepared(sh -c true)",
        options.runs,
        1.5,
        &mut harness,
        "Command::status(sh -c true)",
        &mut floor,
    );
    confined(repo, options, &never);
}

/// `Sandbox::run` with every layer this machine has, beside the same without a sandbox.
fn confined(repo: &Repo, options: &Options, never: &AtomicBool) {
    let helper = std::path::PathBuf::from(env!("CARGO_BIN_EXE_agent-git"));
    let start = |mode| {
        Sandbox::start(
            mode,
            helper.clone(),
            &repo.path,
            Limits::default(),
            agent_git::sandbox::Reach::default(),
        )
        .expect("sandbox")
    };
    let (on, off) = (start(Mode::On), start(Mode::Off));
    println!("  sandbox: {}", on.describe());
    let run = |sandbox: &Sandbox| {
        let jail = sandbox.model_jail();
        batch(&mut || {
            let raw = sandbox
                .run(&jail, "true", TIMEOUT, never, &mut |_| {})
                .expect("runs");
            assert_eq!(raw.exit_code, Some(0), "{}", raw.output);
        })
    };
    // Confinement costs a fixed amount a process (namespaces, mounts, Landlock, a cgroup):
    // beside a process of a millisecond a ratio says little, the extra time says it all.
    let (mut confined, mut plain) = (Vec::new(), Vec::new());
    for _ in 0..options.runs {
        confined.push(run(&on));
        plain.push(run(&off));
    }
    let (confined, plain) = (Stats::of(confined), Stats::of(plain));
    let extra = confined.median.saturating_sub(plain.median) / BATCH as u32;
    println!(
        "  {:<40} {}   {:<34} {}   +{:.1} ms a process",
        "Sandbox::run(true), confined",
        confined.text(),
        "Sandbox::run(true), sandbox off",
        plain.text(),
        extra.as_secs_f64() * 1e3
    );
}

fn shell_true() -> Command {
    let mut command = Command::new("sh");
    command.arg("-c").arg("true");
    command
}

fn batch(one: &mut dyn FnMut()) -> Duration {
    common::time(&mut || (0..BATCH).for_each(|_| one()))
}
