//! API keys leave agent-git's environment as soon as it starts. A command the model runs, or a
//! test, could otherwise read them from `/proc/<agent-git>/environ`, which shows the
//! environment as the process received it, whatever `remove_var` does later: so the bytes
//! themselves are overwritten, and the process is made non-dumpable.

use std::sync::OnceLock;

/// The variables that hold the keys agent-git itself uses; they are kept, in memory only.
pub const API_KEYS: &[&str] = &["ANTHROPIC_API_KEY", "OPENAI_API_KEY"];

static KEYS: OnceLock<Vec<(String, String)>> = OnceLock::new();

/// Whether a variable's name says it holds a secret (an API key, a token, a password).
pub fn looks_secret(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    API_KEYS.contains(&name.as_str())
        || ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"]
            .iter()
            .any(|word| name.split('_').any(|part| part == *word))
}

/// Keeps the API keys, then wipes every secret-looking variable from the environment and from
/// the memory `/proc/self/environ` reads. Call first thing, while the process has one thread.
pub fn take_from_environment() {
    let keys: Vec<(String, String)> = API_KEYS
        .iter()
        .filter_map(|name| std::env::var(name).ok().map(|v| (name.to_string(), v)))
        .collect();
    let _ = KEYS.set(keys);
    let secret: Vec<String> = std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .filter(|name| looks_secret(name))
        .collect();
    wipe_original_environment(&secret);
    for name in &secret {
        std::env::remove_var(name);
    }
    // A non-dumpable process's /proc files are closed to processes without CAP_SYS_PTRACE.
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
}

/// An environment variable as agent-git read it at start: a kept API key, else the live value.
pub fn var(name: &str) -> Option<String> {
    if let Some((_, value)) = KEYS.get().into_iter().flatten().find(|(n, _)| n == name) {
        return Some(value.clone());
    }
    std::env::var(name).ok()
}

/// Overwrites the values of `names` in the environment block the process started with.
fn wipe_original_environment(names: &[String]) {
    extern "C" {
        static mut environ: *mut *mut libc::c_char;
    }
    // SAFETY: called while the process is single-threaded, before anything else reads or
    // changes the environment. `environ` is a NULL-terminated array of pointers to
    // NUL-terminated `NAME=value` strings; each value is overwritten within its own length.
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let text = std::ffi::CStr::from_ptr(*entry).to_bytes();
            if let Some(eq) = text.iter().position(|b| *b == b'=') {
                let name = String::from_utf8_lossy(&text[..eq]);
                if names.iter().any(|n| *n == name) {
                    let value = (*entry).add(eq + 1);
                    std::ptr::write_bytes(value, 0, text.len() - eq - 1);
                }
            }
            entry = entry.add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_names() {
        for name in [
            "ANTHROPIC_API_KEY",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "npm_token",
        ] {
            assert!(looks_secret(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "KEYBOARD",
            "TOKENIZERS_PARALLELISM_X",
            "CARGO_HOME",
        ] {
            assert!(!looks_secret(name), "{name}");
        }
    }
}
