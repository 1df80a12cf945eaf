//! `agent-git completions SHELL` and `agent-git man`: made from the parser's own definitions,
//! installed by the README's lines, and working in the shell and in man.

use crate::common::*;
use std::path::{Path, PathBuf};

/// The subcommands a user sees (`--help` lists them; the hidden helpers are agent-git's own).
fn visible_subcommands() -> Vec<String> {
    <agent_git::cli::Cli as clap::CommandFactory>::command()
        .get_subcommands()
        .filter(|command| !command.is_hide_set())
        .map(|command| command.get_name().to_string())
        .collect()
}

/// What bash offers for `line` (the cursor at its end; a trailing space starts a new word):
/// the script sourced, the function it registered for `agent-git` called as bash would.
fn bash_completes(env: &TestEnv, script: &Path, line: &str) -> Vec<String> {
    let words: Vec<String> = line.split(' ').map(|w| format!("'{w}'")).collect();
    let driver = format!(
        "source '{script}' || exit 1\n\
         spec=$(complete -p agent-git) || exit 1\n\
         spec=${{spec#*-F }}; function=${{spec%% *}}\n\
         COMP_WORDS=({words}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))\n\
         COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}\n\
         \"$function\" agent-git \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script = script.display(),
        words = words.join(" "),
    );
    let out = env.bash(env.path(), &driver);
    assert_eq!(code(&out), 0, "completing {line:?}: {}", stderr(&out));
    stdout(&out).lines().map(str::to_string).collect()
}

fn bash_script(env: &TestEnv) -> PathBuf {
    let out = env.agent(env.path(), &["completions", "bash"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let script = env.path().join("agent-git.bash");
    std::fs::write(&script, stdout(&out)).unwrap();
    script
}

fn has(program: &str) -> bool {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .any(|dir| Path::new(dir).join(program).is_file())
}

#[test]
fn the_bash_script_parses_and_completes_subcommands_and_their_flags() {
    let env = TestEnv::new();
    let script = bash_script(&env);
    let syntax = env.bash(env.path(), &format!("bash -n '{}'", script.display()));
    assert_eq!(code(&syntax), 0, "bash -n: {}", stderr(&syntax));

    assert_eq!(bash_completes(&env, &script, "agent-git fi"), ["fix"]);
    let flags = bash_completes(&env, &script, "agent-git fix --max-t");
    for flag in ["--max-turns", "--max-time"] {
        assert!(flags.contains(&flag.to_string()), "{flag} in {flags:?}");
    }
    assert!(flags.iter().all(|f| f.starts_with("--max-t")), "{flags:?}");

    let offered = bash_completes(&env, &script, "agent-git ");
    for name in visible_subcommands() {
        assert!(offered.contains(&name), "{name} offered: {offered:?}");
    }
    for hidden in ["sandbox-exec", "check-out-room", "add-work-tree"] {
        assert!(
            !offered.contains(&hidden.to_string()),
            "{hidden} is internal"
        );
    }
}

#[test]
fn the_zsh_and_fish_scripts_name_every_subcommand() {
    let env = TestEnv::new();
    for shell in ["zsh", "fish"] {
        let out = env.agent(env.path(), &["completions", shell]);
        assert_eq!(code(&out), 0, "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        assert!(!script.trim().is_empty(), "{shell}: an empty script");
        for name in visible_subcommands() {
            let named = match shell {
                "zsh" => format!("'{name}:"),
                _ => format!("-a \"{name}\""),
            };
            assert!(script.contains(&named), "{shell} names {name} ({named})");
        }
        assert!(
            !script.contains("sandbox-exec"),
            "{shell}: the helper is internal"
        );
        if has(shell) {
            let file = env.path().join(format!("agent-git.{shell}"));
            std::fs::write(&file, &script).unwrap();
            let check = if shell == "zsh" { "-n" } else { "--no-execute" };
            let parsed = std::process::Command::new(shell)
                .arg(check)
                .arg(&file)
                .output()
                .unwrap();
            assert_eq!(code(&parsed), 0, "{shell} {check}: {}", stderr(&parsed));
        } else {
            println!("{shell} is not installed: its script's syntax is not checked");
        }
    }
}

#[test]
fn an_unknown_shell_is_a_usage_error_that_names_the_known_ones() {
    let env = TestEnv::new();
    let out = env.agent(env.path(), &["completions", "tcsh"]);
    assert_eq!(code(&out), 2);
    let said = stderr(&out);
    assert!(said.contains("invalid value 'tcsh'"), "{said}");
    assert!(
        said.contains("[possible values: bash, zsh, fish]"),
        "{said}"
    );
    assert_eq!(stdout(&out), "");
}

/// What `man -l -` renders of the page that `page_cmd` prints, or None when man is not
/// installed.
fn man_renders(env: &TestEnv, page_cmd: &str) -> Option<String> {
    if !has("man") {
        println!("man is not installed: the page is not rendered");
        return None;
    }
    let out = env.bash(
        env.path(),
        &format!("set -o pipefail; MANWIDTH=100 {page_cmd} | man -l -"),
    );
    assert_eq!(code(&out), 0, "{page_cmd} | man -l -: {}", stderr(&out));
    assert_eq!(stderr(&out), "", "{page_cmd} | man -l -");
    Some(stdout(&out))
}

#[test]
fn the_man_page_is_roff_that_names_every_subcommand_and_renders() {
    let env = TestEnv::new();
    let out = env.agent(env.path(), &["man"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let page = stdout(&out);
    assert!(page.contains(".TH agent-git 1"), "a roff page: {page}");
    for name in visible_subcommands() {
        let named = format!("agent\\-git\\-{}(1)", name.replace('-', "\\-"));
        assert!(page.contains(&named), "the page names {name}");
    }
    assert!(!page.contains("sandbox"), "the helpers are internal");
    if let Some(text) = man_renders(&env, "agent-git man") {
        assert!(text.contains("SUBCOMMANDS") && text.contains("agent-git-fix(1)"));
    }
}

#[test]
fn man_dir_writes_the_page_of_every_subcommand_it_names() {
    let env = TestEnv::new();
    let dir = env.path().join("pages/man1");
    let out = env.agent(env.path(), &["man", "--dir", dir.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(dir.join("agent-git.1").is_file());
    for name in visible_subcommands() {
        let page = dir.join(format!("agent-git-{name}.1"));
        assert!(page.is_file(), "{} written", page.display());
    }
    assert!(
        dir.join("agent-git-hook-install.1").is_file(),
        "nested ones too"
    );
    if let Some(text) = man_renders(&env, &format!("cat '{}/agent-git-fix.1'", dir.display())) {
        assert!(text.contains("--max-turns"), "{text}");
    }

    let unwritable = env.agent(env.path(), &["man", "--dir", "/proc/agent-git-man"]);
    assert_eq!(code(&unwritable), 2);
    assert!(stderr(&unwritable).contains("cannot write the man pages to /proc/agent-git-man"));
}

/// The README's install lines, run as written by a user whose HOME is fresh: each one works.
#[test]
fn the_readme_install_lines_install_working_completions_and_man_pages() {
    let env = TestEnv::new();
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let install = readme.split("\n## Install\n").nth(1).unwrap();
    let install = install.split("\n## ").next().unwrap();
    let lines: Vec<&str> = install
        .lines()
        .filter_map(|l| l.strip_prefix("    "))
        .filter(|l| l.contains("agent-git completions") || l.contains("agent-git man"))
        .collect();
    for shell in [
        "completions bash",
        "completions zsh",
        "completions fish",
        "man --dir",
    ] {
        assert_eq!(
            lines.iter().filter(|l| l.contains(shell)).count(),
            1,
            "one install line for `agent-git {shell}` in {lines:?}"
        );
    }
    for line in &lines {
        let out = env.bash(env.path(), line);
        assert_eq!(code(&out), 0, "{line}: {}", stderr(&out));
    }

    let home = env.path().join("home");
    let bash = home.join(".local/share/bash-completion/completions/agent-git");
    assert_eq!(
        bash_completes(&env, &bash, "agent-git tran"),
        ["transcript"]
    );
    let zshrc = std::fs::read_to_string(home.join(".zshrc")).unwrap();
    assert_eq!(zshrc, "source <(agent-git completions zsh)\n");
    let fish = std::fs::read_to_string(home.join(".config/fish/completions/agent-git.fish"));
    assert!(fish.unwrap().contains("-a \"fix\""));

    // man-db looks beside each PATH entry: ~/.cargo/bin, where cargo installs, brings
    // ~/.cargo/share/man, where the line put the pages.
    if !has("man") {
        println!("man is not installed: the installed pages are not looked up");
        return;
    }
    std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
    let found = env.bash(
        env.path(),
        "PATH=$HOME/.cargo/bin:$PATH man -w agent-git agent-git-fix",
    );
    assert_eq!(code(&found), 0, "{}", stderr(&found));
    let pages = home.join(".cargo/share/man/man1");
    assert_eq!(
        stdout(&found),
        format!(
            "{}\n{}\n",
            pages.join("agent-git.1").display(),
            pages.join("agent-git-fix.1").display()
        )
    );
}
