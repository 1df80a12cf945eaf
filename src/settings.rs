//! Where a run's settings come from: flags, then environment (both through clap), then git
//! config (repository, then global), then a committed `.agentgit` file, then defaults.

use git2::{Config, ErrorCode, Oid, Repository};

/// Writes out every setting from its one definition: the `Layer` a source gives and the
/// merged `Settings`, how each source is read (`merge`, `read_layer`, `Layer::from_env`), the
/// flags (`SettingFlags`) and the table the docs and tests hold to (`definitions`).
///
/// A setting is `one` (set or not: `Option<T>`), `defaulted` (a `T`, with its default as a
/// user would write it, read by the same parser) or `list` (values from every source, in
/// order, each once). `flag` gives it a flag of `fix`; `committed: false` keeps it out of a
/// committed `.agentgit`, so that a repository cannot set it for itself.
macro_rules! settings {
    ($(
        $(#[doc = $doc:literal])+
        $field:ident: $shape:ident $ty:ty {
            $(flag: $flag:literal,)?
            value: $value:literal,
            $(env: $env:literal,)?
            key: $key:literal,
            committed: $committed:literal,
            parse: $parse:expr,
            $(default: $default:literal,)?
        }
    )*) => {
        /// One source of settings; unset (`None`, empty) means "ask the next source".
        #[derive(Debug, Default, Clone, PartialEq)]
        pub struct Layer {
            $($(#[doc = $doc])+ pub $field: settings!(@layer $shape $ty),)*
        }

        /// The settings of a run: the first source that sets each, else its default.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Settings {
            $($(#[doc = $doc])+ pub $field: settings!(@merged $shape $ty),)*
        }

        /// The first source that sets a value wins; a list adds up the values of all.
        pub fn merge(layers: &[Layer]) -> Settings {
            Settings {
                $($field: settings!(@merge $shape layers $field $parse $(, $default)?),)*
            }
        }

        /// The settings `config` holds; those `committed: false` only where `origin` is not
        /// a committed `.agentgit`.
        fn read_layer(config: &Config, origin: Origin) -> Result<Layer, String> {
            let mut layer = Layer::default();
            $(
                if $committed || origin != Origin::Committed {
                    let parse = $parse;
                    let parsed = |v: String| {
                        parse(&v).map_err(|e| format!("{} in {}: {e}", $key, origin.name()))
                    };
                    layer.$field = settings!(@read $shape config origin $key parsed);
                }
            )*
            Ok(layer)
        }

        impl Layer {
            /// What the environment sets (settings that have a variable).
            pub fn from_env() -> Result<Layer, String> {
                #[allow(unused_mut)]
                let mut layer = Layer::default();
                $($(
                    if let Ok(value) = std::env::var($env) {
                        let parse = $parse;
                        let value = parse(&value).map_err(|e| format!("{}: {e}", $env))?;
                        layer.$field = settings!(@one $shape value);
                    }
                )?)*
                Ok(layer)
            }
        }

        /// Every setting, as defined.
        pub fn definitions() -> Vec<Definition> {
            vec![$(Definition {
                field: stringify!($field),
                flag: settings!(@opt $($flag)?),
                value_name: $value,
                env: settings!(@opt $($env)?),
                key: $key,
                committed: $committed,
                list: settings!(@is_list $shape),
                default: settings!(@opt $($default)?),
                about: concat!($($doc, "\n"),+),
            },)*]
        }

        /// The flags of the settings `selection` names (all that have one where `None`).
        fn add_flags(mut cmd: clap::Command, selection: Option<&[&str]>) -> clap::Command {
            let chosen = |field: &str| selection.is_none_or(|names| names.contains(&field));
            let defined = definitions();
            let of = |field: &str| defined.iter().find(|d| d.field == field);
            $($(
                if let Some(definition) = of(stringify!($field)).filter(|d| chosen(d.field)) {
                    let arg = clap::Arg::new(stringify!($field))
                        .long($flag)
                        .value_name($value)
                        .help(definition.help())
                        .value_parser($parse)
                        .action(settings!(@action $shape));
                    cmd = cmd.arg(match definition.env {
                        Some(env) => arg.env(env),
                        None => arg,
                    });
                }
            )?)*
            cmd
        }

        /// The settings the flags in `matches` set.
        fn flags_layer(matches: &clap::ArgMatches) -> Layer {
            #[allow(unused_mut)]
            let mut layer = Layer::default();
            $($(
                let _ = $flag;
                layer.$field = settings!(@flag $shape matches $field $ty);
            )?)*
            layer
        }
    };

    (@opt) => { None };
    (@opt $value:literal) => { Some($value) };
    (@layer list $ty:ty) => { Vec<$ty> };
    (@layer $shape:ident $ty:ty) => { Option<$ty> };
    (@merged defaulted $ty:ty) => { $ty };
    (@merged one $ty:ty) => { Option<$ty> };
    (@merged list $ty:ty) => { Vec<$ty> };
    (@merge list $layers:ident $field:ident $parse:expr) => {{
        let mut all = Vec::new();
        for value in $layers.iter().flat_map(|layer| layer.$field.iter()) {
            if !all.contains(value) {
                all.push(value.clone());
            }
        }
        all
    }};
    (@merge one $layers:ident $field:ident $parse:expr) => {
        $layers.iter().find_map(|layer| layer.$field.clone())
    };
    (@merge defaulted $layers:ident $field:ident $parse:expr, $default:literal) => {
        $layers.iter().find_map(|layer| layer.$field.clone()).unwrap_or_else(|| {
            let parse = $parse;
            parse($default).expect(concat!("the default of ", stringify!($field)))
        })
    };
    (@read list $config:ident $origin:ident $key:literal $parsed:ident) => {
        all_values($config, $origin, $key)?.into_iter().map($parsed).collect::<Result<_, _>>()?
    };
    (@read $shape:ident $config:ident $origin:ident $key:literal $parsed:ident) => {
        one_value($config, $origin, $key)?.map($parsed).transpose()?
    };
    (@one list $value:ident) => { vec![$value] };
    (@one $shape:ident $value:ident) => { Some($value) };
    (@is_list list) => { true };
    (@is_list $shape:ident) => { false };
    (@action list) => { clap::ArgAction::Append };
    (@action $shape:ident) => { clap::ArgAction::Set };
    (@flag list $matches:ident $field:ident $ty:ty) => {
        $matches
            .try_get_many::<$ty>(stringify!($field))
            .ok()
            .flatten()
            .map(|values| values.cloned().collect())
            .unwrap_or_default()
    };
    (@flag $shape:ident $matches:ident $field:ident $ty:ty) => {
        $matches.try_get_one::<$ty>(stringify!($field)).ok().flatten().cloned()
    };
}

settings! {
    /// The model: anthropic:MODEL, openai:MODEL (openai-responses:MODEL, openai-chat:MODEL to
    /// choose the API), script:PATH or replay:PATH.
    model: one String {
        flag: "model",
        value: "SPEC",
        env: "AGENT_GIT_MODEL",
        key: "agent-git.model",
        committed: true,
        parse: text,
    }
    /// Shell command that runs the tests, in the clean room: the branch's committed tree,
    /// outside your checkout [default: detected from the repository's files].
    test_cmd: one String {
        flag: "test-cmd",
        value: "CMD",
        key: "agent-git.testCmd",
        committed: true,
        parse: text,
    }
    /// Shell command run in the clean room before the first test run, and again only when
    /// the files it depends on change (package.json, lock files, requirements,
    /// pyproject.toml, ...): an install step such as `npm ci --offline`.
    setup_cmd: one String {
        flag: "setup-cmd",
        value: "CMD",
        key: "agent-git.setupCmd",
        committed: true,
        parse: text,
    }
    /// Seconds one test run may take before its whole process group is killed.
    test_timeout: defaulted u64 {
        flag: "test-timeout",
        value: "SECS",
        key: "agent-git.testTimeout",
        committed: true,
        parse: seconds,
        default: "300",
    }
    /// Most model replies the run may use.
    max_turns: defaulted u32 {
        flag: "max-turns",
        value: "N",
        key: "agent-git.maxTurns",
        committed: true,
        parse: count,
        default: "30",
    }
    /// Gitignore-style pattern of more paths the agent may not change, added to the
    /// defaults.
    protect: list String {
        flag: "protect",
        value: "GLOB",
        key: "agent-git.protect",
        committed: true,
        parse: text,
    }
    /// End the run when its model cost reaches USD dollars (outcome cost-limit); needs a
    /// known price for the model [default: no limit].
    max_cost: one f64 {
        flag: "max-cost",
        value: "USD",
        key: "agent-git.maxCost",
        committed: true,
        parse: parse_dollars,
    }
    /// Most tokens in one model reply.
    max_tokens: defaulted u32 {
        flag: "max-tokens",
        value: "N",
        key: "agent-git.maxTokens",
        committed: true,
        parse: count,
        default: "8192",
    }
    /// The model's price, `INPUT OUTPUT [CACHE_WRITE CACHE_READ]` dollars per million tokens
    /// [default: the built-in table].
    price: one String {
        value: "PRICES",
        key: "agent-git.price",
        committed: true,
        parse: text,
    }
    /// Files larger than this are not committed (the model is told). Bytes, or with a unit:
    /// 512k, 10m, 1g.
    max_file_size: defaulted u64 {
        flag: "max-file-size",
        value: "SIZE",
        key: "agent-git.maxFileSize",
        committed: true,
        parse: parse_size,
        default: "10m",
    }
    /// How an OpenAI-compatible server is told the reply's token limit: max_tokens or
    /// max_completion_tokens [default: by model name].
    token_param: one String {
        value: "NAME",
        key: "agent-git.tokenParam",
        committed: true,
        parse: text,
    }
    /// The model's context window in tokens; near it, old tool results are dropped
    /// [default: known per model, else asked of a local server].
    context_window: one u64 {
        flag: "context-window",
        value: "TOKENS",
        key: "agent-git.contextWindow",
        committed: true,
        parse: window,
    }
    /// A directory that commands and tests may write to although the sandbox is on, e.g. a
    /// shared build cache. The report lists them.
    allow_write: list String {
        flag: "allow-write",
        value: "DIR",
        key: "agent-git.sandbox.allowWrite",
        committed: false,
        parse: text,
    }
    /// A path under HOME that commands and tests may read, besides the toolchains' homes
    /// and caches they see there. The rest of HOME is empty to them.
    allow_read: list String {
        flag: "allow-read",
        value: "PATH",
        key: "agent-git.sandbox.allowRead",
        committed: false,
        parse: text,
    }
    /// Retries of a failed API call (408, 409, 429, 5xx, connection errors), with backoff.
    max_retries: defaulted u32 {
        flag: "max-retries",
        value: "N",
        key: "agent-git.maxRetries",
        committed: true,
        parse: whole::<u32>,
        default: "4",
    }
    /// Seconds one API call may take (for a stream, the wait for its next data).
    request_timeout: defaulted u64 {
        flag: "request-timeout",
        value: "SECS",
        key: "agent-git.requestTimeout",
        committed: true,
        parse: seconds,
        default: "600",
    }
    /// The size in tokens of the repository map in the first message: source files and
    /// their definitions, the files nearest the failing tests first. 0 leaves it out.
    map_tokens: defaulted usize {
        flag: "map-tokens",
        value: "TOKENS",
        key: "agent-git.mapTokens",
        committed: true,
        parse: whole::<usize>,
        default: "2000",
    }
    /// How hard an Anthropic model thinks: a budget in tokens a reply (at least 1024),
    /// adaptive (the newer models), or off; the reply's token limit grows to hold it
    /// [default: by model family, see the docs].
    thinking: one crate::model::Thinking {
        flag: "thinking",
        value: "TOKENS|adaptive|off",
        key: "agent-git.thinking",
        committed: true,
        parse: crate::model::Thinking::parse,
    }
    /// How hard an OpenAI reasoning model reasons: minimal, low, medium or high [default:
    /// medium for a reasoning model, none for others].
    reasoning_effort: one crate::model::Effort {
        flag: "reasoning-effort",
        value: "EFFORT",
        key: "agent-git.reasoningEffort",
        committed: true,
        parse: crate::model::Effort::parse,
    }
    /// End the run when it has taken this long (outcome time-limit): 90s, 10m, 1h30m, or
    /// seconds. The final test run still comes, bounded by the test timeout [default: no
    /// limit].
    max_time: one std::time::Duration {
        flag: "max-time",
        value: "DURATION",
        key: "agent-git.maxTime",
        committed: true,
        parse: duration,
    }
    /// The longest a run_command call may take, in seconds (the model asks for 120 by
    /// default).
    max_command_timeout: defaulted u64 {
        flag: "max-command-timeout",
        value: "SECS",
        key: "agent-git.maxCommandTimeout",
        committed: true,
        parse: seconds,
        default: "600",
    }
}

/// Every setting at its default: what no source sets.
pub fn defaults() -> Settings {
    merge(&[])
}

/// One setting as defined: what `--help`, the docs and each source are held to.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    /// The name it has in `Settings`.
    pub field: &'static str,
    /// Its flag of `fix`, without the dashes, where it has one.
    pub flag: Option<&'static str>,
    /// The placeholder for its value in `--help` and the README (`N`, `SECS`).
    pub value_name: &'static str,
    /// The environment variable that sets it, where one does.
    pub env: Option<&'static str>,
    /// Its git-config key (also its `.agentgit` key where `committed`).
    pub key: &'static str,
    /// Whether a committed `.agentgit` may set it.
    pub committed: bool,
    /// Whether values from every source add up.
    pub list: bool,
    /// Its default as a user would write it.
    pub default: Option<&'static str>,
    /// What it does, as its doc comment says it.
    pub about: &'static str,
}

impl Definition {
    /// Its help text: what it does, then its other sources and its default.
    pub fn help(&self) -> String {
        let about = self.about.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut sources = format!("git config {}", self.key);
        if !self.committed {
            sources.push_str(", never a committed .agentgit");
        } else {
            sources.push_str(" or .agentgit");
        }
        if self.list {
            sources.push_str("; repeatable, and the values of every source add up");
        }
        let default = self
            .default
            .map(|d| format!(" [default: {d}]"))
            .unwrap_or_default();
        format!("{about} Also from {sources}.{default}")
    }
}

/// The docs' table of every setting, one row each, as docs/reference.md holds it.
pub fn table() -> String {
    let mut table = String::from(
        "| flag | git config key | in `.agentgit` | default | what it is |\n\
         | --- | --- | --- | --- | --- |\n",
    );
    for d in definitions() {
        let flag = match d.flag {
            Some(flag) => format!("`--{flag} {}`", d.value_name),
            None => "(none)".to_string(),
        };
        let key = match d.env {
            Some(env) => format!("`{}` (or `{env}`)", d.key),
            None => format!("`{}`", d.key),
        };
        let list = if d.list {
            " Repeatable; the values of every source add up."
        } else {
            ""
        };
        let about = d.about.split_whitespace().collect::<Vec<_>>().join(" ");
        table.push_str(&format!(
            "| {flag} | {key} | {} | {} | {about}{list} |\n",
            if d.committed { "yes" } else { "never" },
            d.default.map_or("".to_string(), |v| format!("`{v}`")),
        ));
    }
    table
}

/// Where a layer's settings were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// The user's git config (repository, then global).
    GitConfig,
    /// The `.agentgit` committed at the base.
    Committed,
    #[cfg(test)]
    Test,
}

impl Origin {
    fn name(self) -> &'static str {
        match self {
            Origin::GitConfig => "git config",
            Origin::Committed => ".agentgit",
            #[cfg(test)]
            Origin::Test => "test",
        }
    }
}

/// The settings flags of `fix`: one for each setting that has one.
#[derive(Debug, Clone, Default)]
pub struct SettingFlags(pub Layer);

/// The settings flags of `tests`: those of a test run.
#[derive(Debug, Clone, Default)]
pub struct TestFlags(pub Layer);

/// The settings `tests` offers flags for.
const OF_TESTS: &[&str] = &["test_cmd", "setup_cmd", "test_timeout"];

macro_rules! flags_of {
    ($type:ident, $selection:expr) => {
        impl clap::FromArgMatches for $type {
            fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
                Ok($type(flags_layer(matches)))
            }
            fn update_from_arg_matches(
                &mut self,
                matches: &clap::ArgMatches,
            ) -> Result<(), clap::Error> {
                self.0 = flags_layer(matches);
                Ok(())
            }
        }
        impl clap::Args for $type {
            fn augment_args(cmd: clap::Command) -> clap::Command {
                add_flags(cmd, $selection)
            }
            fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
                add_flags(cmd, $selection)
            }
        }
    };
}
flags_of!(SettingFlags, None);
flags_of!(TestFlags, Some(OF_TESTS));

fn one_value(config: &Config, origin: Origin, key: &str) -> Result<Option<String>, String> {
    match config.get_string(key) {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.code() == ErrorCode::NotFound => Ok(None),
        Err(e) => Err(format!("{key} in {}: {}", origin.name(), e.message())),
    }
}

fn all_values(config: &Config, origin: Origin, key: &str) -> Result<Vec<String>, String> {
    let mut values = Vec::new();
    if let Ok(entries) = config.multivar(key, None) {
        entries
            .for_each(|entry| {
                if let Ok(value) = entry.value() {
                    values.push(value.to_string());
                }
            })
            .map_err(|e| format!("{key} in {}: {}", origin.name(), e.message()))?;
    }
    Ok(values)
}

/// Any text.
fn text(value: &str) -> Result<String, String> {
    Ok(value.to_string())
}

/// A whole number of type `T`.
fn whole<T: std::str::FromStr>(value: &str) -> Result<T, String> {
    value
        .trim()
        .parse::<T>()
        .map_err(|_| format!("`{value}` is not a whole number (or is too large)"))
}

/// A count that is at least 1.
fn count(value: &str) -> Result<u32, String> {
    whole::<u32>(value)?
        .checked_sub(1)
        .map(|n| n + 1)
        .ok_or_else(|| format!("`{value}` is not at least 1"))
}

/// Seconds, at least 1.
fn seconds(value: &str) -> Result<u64, String> {
    match whole::<u64>(value)? {
        0 => Err(format!("`{value}` is not at least 1 second")),
        secs => Ok(secs),
    }
}

/// A span of time: seconds, or with units as `90s`, `10m`, `1h30m`, `2h 15m`; more than 0.
fn duration(value: &str) -> Result<std::time::Duration, String> {
    let text = value.trim();
    let parsed = match text.parse::<u64>() {
        Ok(secs) => Ok(std::time::Duration::from_secs(secs)),
        Err(_) => humantime::parse_duration(text).map_err(|e| e.to_string()),
    };
    match parsed {
        Ok(span) if !span.is_zero() => Ok(span),
        Ok(_) => Err(format!("`{value}` is no time at all")),
        Err(why) => Err(format!(
            "`{value}` is not a duration such as 90s, 10m or 1h30m ({why})"
        )),
    }
}

/// A context window, at least 1000 tokens.
fn window(value: &str) -> Result<u64, String> {
    match whole::<u64>(value)? {
        tokens if tokens >= 1000 => Ok(tokens),
        _ => Err(format!("`{value}` is less than 1000 tokens")),
    }
}

/// The git-config layers of a repository: its config (local over global) and then the
/// `.agentgit` file committed at the root of `base`.
pub fn config_layers(repo: &Repository, base: Oid) -> Result<Vec<Layer>, String> {
    let config = repo
        .config()
        .map_err(|e| format!("cannot read git config: {e}"))?;
    let mut layers = vec![read_layer(&config, Origin::GitConfig)?];
    if let Some(text) = crate::workspace::read_blob(repo, base, ".agentgit") {
        let team = open_committed(&text)?;
        layers.push(read_layer(&team, Origin::Committed)?);
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
                max_turns: 5,
                protect: vec!["golden/".into(), "fixtures/".into()],
                ..defaults()
            }
        );
    }

    #[test]
    fn every_default_is_the_value_its_text_says() {
        let d = defaults();
        assert_eq!(d.test_timeout, 300);
        assert_eq!(d.max_turns, 30);
        assert_eq!(d.max_tokens, 8192);
        assert_eq!(d.max_file_size, 10 << 20);
        assert_eq!(d.max_retries, 4);
        assert_eq!(d.request_timeout, 600);
        assert_eq!(d.map_tokens, 2000);
        assert_eq!(d.max_command_timeout, 600);
        assert_eq!((d.model, d.max_cost, d.protect), (None, None, vec![]));
        assert_eq!(d.max_time, None);
    }

    #[test]
    fn durations_read_with_or_without_units() {
        let secs = std::time::Duration::from_secs;
        assert_eq!(duration("90"), Ok(secs(90)));
        assert_eq!(duration("90s"), Ok(secs(90)));
        assert_eq!(duration("10m"), Ok(secs(600)));
        assert_eq!(duration("1h30m"), Ok(secs(5400)));
        assert_eq!(duration(" 2h 15m "), Ok(secs(8100)));
        assert!(duration("0").is_err());
        assert!(duration("0s").is_err());
        assert!(duration("soon").unwrap_err().contains("not a duration"));
        assert!(duration("-5m").is_err());
    }

    #[test]
    fn every_setting_has_one_key_and_flag_and_the_sandbox_ones_are_never_committed() {
        let all = definitions();
        for (i, d) in all.iter().enumerate() {
            assert!(d.key.starts_with("agent-git."), "{d:?}");
            assert!(
                all[i + 1..]
                    .iter()
                    .all(|e| e.key != d.key && (e.flag.is_none() || e.flag != d.flag)),
                "{d:?}"
            );
            assert!(!d.about.trim().is_empty(), "{d:?}");
            assert_eq!(
                d.key.starts_with("agent-git.sandbox."),
                !d.committed,
                "{d:?}"
            );
        }
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
        let layer = read_layer(&Config::open(&path).unwrap(), Origin::Test).unwrap();
        assert_eq!(
            layer,
            Layer {
                model: Some("script:x.json".into()),
                test_cmd: Some("make test".into()),
                max_turns: Some(7),
                protect: vec!["a/".into(), "*.snap".into()],
                max_cost: Some(2.5),
                price: Some("3 15".into()),
                setup_cmd: Some("npm ci".into()),
                max_file_size: Some(2 << 20),
                token_param: Some("max_tokens".into()),
                context_window: Some(32768),
                allow_write: vec!["/c".into()],
                ..Layer::default()
            }
        );
        // A committed file sets no sandbox setting.
        let committed = read_layer(&Config::open(&path).unwrap(), Origin::Committed).unwrap();
        assert_eq!(committed.allow_write, Vec::<String>::new());
        assert_eq!(committed.test_cmd.as_deref(), Some("make test"));
        std::fs::write(&path, "[agent-git]\n\tmaxTurns = lots\n").unwrap();
        let err = read_layer(&Config::open(&path).unwrap(), Origin::Test).unwrap_err();
        assert_eq!(
            err,
            "agent-git.maxTurns in test: `lots` is not a whole number (or is too large)"
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
