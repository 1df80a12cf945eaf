//! Where a run's settings come from: flags, then environment (both through clap), then git
//! config (repository, then global), then a committed `.agentgit` file, then defaults.

use git2::{Config, ErrorCode, Oid, Repository};

pub const DEFAULT_TEST_TIMEOUT: u64 = 300;
pub const DEFAULT_MAX_TURNS: u32 = 30;
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// One source of settings; `None` means "not set here, ask the next source".
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Layer {
    pub model: Option<String>,
    pub test_cmd: Option<String>,
    pub test_timeout: Option<u64>,
    pub max_turns: Option<u32>,
    pub protect: Vec<String>,
    pub max_cost: Option<f64>,
    pub max_tokens: Option<u32>,
    /// `INPUT OUTPUT [CACHE_WRITE CACHE_READ]` dollars per million tokens.
    pub price: Option<String>,
    pub setup_cmd: Option<String>,
    pub max_file_size: Option<u64>,
    /// `max_tokens` or `max_completion_tokens`: how an OpenAI-compatible server is told the
    /// reply's token limit [default: by model name].
    pub token_param: Option<String>,
    /// The model's context window in tokens.
    pub context_window: Option<u64>,
    /// Directories the sandbox leaves writable; from flags and git config only, never from
    /// a committed `.agentgit` (a repository must not widen the sandbox it is tested in).
    pub allow_write: Vec<String>,
    /// Paths under HOME the sandbox lets commands read, besides what toolchains need; from
    /// flags and git config only, like `allow_write`.
    pub allow_read: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub model: Option<String>,
    pub test_cmd: Option<String>,
    pub test_timeout: u64,
    pub max_turns: u32,
    /// Patterns added to the default protected ones, from every source.
    pub protect: Vec<String>,
    pub max_cost: Option<f64>,
    pub max_tokens: u32,
    pub price: Option<String>,
    pub setup_cmd: Option<String>,
    pub max_file_size: u64,
    pub token_param: Option<String>,
    pub context_window: Option<u64>,
    pub allow_write: Vec<String>,
    pub allow_read: Vec<String>,
}

/// The first source that sets a value wins; protected patterns and writable dirs add up.
pub fn merge(layers: &[Layer]) -> Settings {
    let first = |f: &dyn Fn(&Layer) -> Option<String>| layers.iter().find_map(f);
    let union = |f: &dyn Fn(&Layer) -> &Vec<String>| {
        let mut all: Vec<String> = Vec::new();
        for value in layers.iter().flat_map(f) {
            if !all.contains(value) {
                all.push(value.clone());
            }
        }
        all
    };
    Settings {
        model: first(&|l| l.model.clone()),
        test_cmd: first(&|l| l.test_cmd.clone()),
        test_timeout: layers
            .iter()
            .find_map(|l| l.test_timeout)
            .unwrap_or(DEFAULT_TEST_TIMEOUT),
        max_turns: layers
            .iter()
            .find_map(|l| l.max_turns)
            .unwrap_or(DEFAULT_MAX_TURNS),
        protect: union(&|l| &l.protect),
        max_cost: layers.iter().find_map(|l| l.max_cost),
        max_tokens: layers
            .iter()
            .find_map(|l| l.max_tokens)
            .unwrap_or(DEFAULT_MAX_TOKENS),
        price: first(&|l| l.price.clone()),
        setup_cmd: first(&|l| l.setup_cmd.clone()),
        max_file_size: layers
            .iter()
            .find_map(|l| l.max_file_size)
            .unwrap_or(crate::workspace::DEFAULT_MAX_FILE_SIZE),
        token_param: first(&|l| l.token_param.clone()),
        context_window: layers.iter().find_map(|l| l.context_window),
        allow_write: union(&|l| &l.allow_write),
        allow_read: union(&|l| &l.allow_read),
    }
}

/// The git-config layers of a repository: its config (local over global) and then the
/// `.agentgit` file committed at the root of `base`.
pub fn config_layers(repo: &Repository, base: Oid) -> Result<Vec<Layer>, String> {
    let config = repo
        .config()
        .map_err(|e| format!("cannot read git config: {e}"))?;
    let mut layers = vec![read_layer(&config, "git config")?];
    if let Some(text) = crate::workspace::read_blob(repo, base, ".agentgit") {
        let team = open_committed(&text)?;
        let mut team = read_layer(&team, ".agentgit")?;
        team.allow_write.clear();
        team.allow_read.clear();
        layers.push(team);
    }
    Ok(layers)
}

/// The committed `.agentgit` as a config that reads only itself. git-config syntax has
/// `[include]` and `[includeIf]`, which read other files (relative ones beside the file, which
/// is a temp dir anyone can write to; absolute and `~` ones anywhere): a committed file that
/// has one is refused before it is opened. The file is opened alone in a private folder, and
/// what libgit2 read is checked again for include keys, whatever syntax named them.
fn open_committed(text: &[u8]) -> Result<Config, String> {
    let refused = |how: &str| {
        format!(
            "the committed .agentgit has {how}: a committed configuration reads only itself; \
             put the settings in .agentgit or in your own git config"
        )
    };
    if let Some(section) = include_section(text) {
        return Err(refused(&format!("an [{section}] section")));
    }
    let dir = tempfile::tempdir().map_err(|e| format!("cannot read .agentgit: {e}"))?;
    let path = dir.path().join("agentgit");
    std::fs::write(&path, text).map_err(|e| format!("cannot read .agentgit: {e}"))?;
    let config = Config::open(&path)
        .map_err(|e| format!("the committed .agentgit is not in git-config syntax: {e}"))?;
    let mut included = None;
    if let Ok(entries) = config.entries(None) {
        let _ = entries.for_each(|entry| {
            let name = entry.name().unwrap_or_default().to_ascii_lowercase();
            if name.starts_with("include.") || name.starts_with("includeif.") {
                included = Some(name);
            }
        });
    }
    match included {
        Some(name) => Err(refused(&format!("`{name}`"))),
        None => Ok(config),
    }
}

/// The name of the first `[include]` or `[includeIf ...]` section header in git-config text,
/// however it is cased or spaced.
fn include_section(text: &[u8]) -> Option<String> {
    String::from_utf8_lossy(text).lines().find_map(|line| {
        // A byte-order mark, which libgit2 skips, is no part of the header either.
        let line = line.trim_start_matches('\u{feff}').trim_start();
        let header = line.strip_prefix('[')?;
        let name: String = header
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        let lower = name.to_ascii_lowercase();
        (lower == "include" || lower == "includeif").then_some(name)
    })
}

fn read_layer(config: &Config, origin: &str) -> Result<Layer, String> {
    let string = |key: &str| match config.get_string(key) {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.code() == ErrorCode::NotFound => Ok(None),
        Err(e) => Err(format!("{key} in {origin}: {}", e.message())),
    };
    let number = |key: &str| -> Result<Option<u64>, String> {
        match string(key)? {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse::<u64>()
                .map(Some)
                .map_err(|_| format!("{key} in {origin} must be a whole number, not `{v}`")),
        }
    };
    let all = |key: &str| -> Result<Vec<String>, String> {
        let mut values = Vec::new();
        if let Ok(entries) = config.multivar(key, None) {
            entries
                .for_each(|entry| {
                    if let Ok(value) = entry.value() {
                        values.push(value.to_string());
                    }
                })
                .map_err(|e| format!("{key} in {origin}: {}", e.message()))?;
        }
        Ok(values)
    };
    let small = |key: &str| -> Result<Option<u32>, String> {
        number(key)?
            .map(|n| u32::try_from(n).map_err(|_| format!("{key} in {origin} is too large")))
            .transpose()
    };
    let max_cost = match string("agent-git.maxCost")? {
        None => None,
        Some(v) => {
            Some(parse_dollars(&v).map_err(|e| format!("agent-git.maxCost in {origin}: {e}"))?)
        }
    };
    let max_file_size = match string("agent-git.maxFileSize")? {
        None => None,
        Some(v) => {
            Some(parse_size(&v).map_err(|e| format!("agent-git.maxFileSize in {origin}: {e}"))?)
        }
    };
    Ok(Layer {
        model: string("agent-git.model")?,
        test_cmd: string("agent-git.testCmd")?,
        test_timeout: number("agent-git.testTimeout")?,
        max_turns: small("agent-git.maxTurns")?,
        protect: all("agent-git.protect")?,
        max_cost,
        max_tokens: small("agent-git.maxTokens")?,
        price: string("agent-git.price")?,
        setup_cmd: string("agent-git.setupCmd")?,
        max_file_size,
        token_param: string("agent-git.tokenParam")?,
        context_window: number("agent-git.contextWindow")?,
        allow_write: all("agent-git.sandbox.allowWrite")?,
        allow_read: all("agent-git.sandbox.allowRead")?,
    })
}

/// A size in bytes: `10485760`, or with a unit as git writes them: `512k`, `10m`, `1g` (also
/// `10MB`, `10 MiB`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let not_a_size = || format!("`{text}` is not a size; use bytes or e.g. 512k, 10m, 1g");
    let lower = text.trim().to_ascii_lowercase();
    let digits_end = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(digits_end);
    let scale: u64 = match unit.trim().trim_end_matches("ib").trim_end_matches('b') {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        _ => return Err(not_a_size()),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|n| *n > 0)
        .ok_or_else(not_a_size)
}

/// A dollar amount: `2.50` or `$2.50`, not negative.
pub fn parse_dollars(text: &str) -> Result<f64, String> {
    text.trim()
        .trim_start_matches('$')
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| format!("`{text}` is not an amount of dollars, e.g. 2.50"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_source_wins_and_protect_patterns_add_up() {
        let flags = Layer {
            max_turns: Some(5),
            protect: vec!["golden/".into()],
            ..Layer::default()
        };
        let git = Layer {
            model: Some("script:a.json".into()),
            max_turns: Some(9),
            protect: vec!["fixtures/".into(), "golden/".into()],
            ..Layer::default()
        };
        let team = Layer {
            model: Some("script:team.json".into()),
            test_cmd: Some("make check".into()),
            ..Layer::default()
        };
        assert_eq!(
            merge(&[flags, git, team]),
            Settings {
                model: Some("script:a.json".into()),
                test_cmd: Some("make check".into()),
                test_timeout: DEFAULT_TEST_TIMEOUT,
                max_turns: 5,
                protect: vec!["golden/".into(), "fixtures/".into()],
                max_cost: None,
                max_tokens: DEFAULT_MAX_TOKENS,
                price: None,
                setup_cmd: None,
                max_file_size: crate::workspace::DEFAULT_MAX_FILE_SIZE,
                token_param: None,
                context_window: None,
                allow_write: vec![],
                allow_read: vec![],
            }
        );
    }

    #[test]
    fn sizes_read_as_git_writes_them() {
        assert_eq!(parse_size("10485760"), Ok(10 << 20));
        assert_eq!(parse_size("512k"), Ok(512 << 10));
        assert_eq!(parse_size("10m"), Ok(10 << 20));
        assert_eq!(parse_size("10 MB"), Ok(10 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert!(parse_size("ten").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("5t").is_err());
    }

    #[test]
    fn reads_a_git_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cfg");
        std::fs::write(
            &path,
            "[agent-git]\n\tmodel = script:x.json\n\ttestCmd = make test\n\tmaxTurns = 7\n\
             \tprotect = a/\n\tprotect = *.snap\n\tmaxCost = $2.50\n\tprice = 3 15\n\
             \tsetupCmd = npm ci\n\tmaxFileSize = 2m\n\ttokenParam = max_tokens\n\
             \tcontextWindow = 32768\n[agent-git \"sandbox\"]\n\tallowWrite = /c\n",
        )
        .unwrap();
        let layer = read_layer(&Config::open(&path).unwrap(), "test").unwrap();
        assert_eq!(
            layer,
            Layer {
                model: Some("script:x.json".into()),
                test_cmd: Some("make test".into()),
                test_timeout: None,
                max_turns: Some(7),
                protect: vec!["a/".into(), "*.snap".into()],
                max_cost: Some(2.5),
                max_tokens: None,
                price: Some("3 15".into()),
                setup_cmd: Some("npm ci".into()),
                max_file_size: Some(2 << 20),
                token_param: Some("max_tokens".into()),
                context_window: Some(32768),
                allow_write: vec!["/c".into()],
                allow_read: vec![],
            }
        );
        std::fs::write(&path, "[agent-git]\n\tmaxTurns = lots\n").unwrap();
        let err = read_layer(&Config::open(&path).unwrap(), "test").unwrap_err();
        assert_eq!(
            err,
            "agent-git.maxTurns in test must be a whole number, not `lots`"
        );
    }

    #[test]
    fn a_committed_config_with_an_include_is_refused_before_anything_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "[agent-git]\n\ttestCmd = true\n").unwrap();
        let outside = outside.display().to_string();
        for text in [
            format!("[include]\n\tpath = {outside}\n"),
            format!("[agent-git]\n\tmaxTurns = 3\n  [ Include ] path = {outside}\n"),
            format!("[includeIf \"gitdir:/\"]\n\tpath = {outside}\n"),
            "[INCLUDEIF \"onbranch:*\"]\npath = relative\n".to_string(),
            "\u{feff}[include]\npath = relative\n".to_string(),
            format!("[include.x]\npath = {outside}\n"),
        ] {
            let refused = open_committed(text.as_bytes()).err().unwrap_or_default();
            assert!(refused.contains("reads only itself"), "{text:?}: {refused}");
        }
        // The second line of defence sees what libgit2 read: its include keys stay listed.
        let file = dir.path().join("with-include");
        std::fs::write(&file, format!("[include]\n\tpath = {outside}\n")).unwrap();
        let config = Config::open(&file).unwrap();
        assert!(config.get_string("include.path").is_ok());
        let team = open_committed(b"[agent-git]\n\ttestCmd = make test\n").unwrap();
        assert_eq!(team.get_string("agent-git.testCmd").unwrap(), "make test");
    }
}
