//! `--model SPEC` parsing: which model a run talks to, and how to reach it.

use super::http::{HttpModel, Provider, Recorder};
use super::{
    anthropic, openai, window, Anthropic, IndentedEcho, Model, OpenAi, ReplayModel, Responses,
    RetryPolicy, ScriptedModel,
};
use std::path::PathBuf;
use std::time::Duration;

/// `--model`: which model a run talks to, as `PROVIDER:NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    /// `script:PATH`: the replies of a JSON file, in order.
    Script(PathBuf),
    /// `replay:PATH`: the responses of a recording (`--record`).
    Replay(PathBuf),
    /// `anthropic:MODEL`: the Anthropic Messages API.
    Anthropic(String),
    /// OpenAI's Responses API for its reasoning models on its own URL, else Chat Completions.
    OpenAi(String),
    /// Always Chat Completions.
    OpenAiChat(String),
    /// Always the Responses API.
    OpenAiResponses(String),
}

const KNOWN: &str =
    "anthropic:MODEL, openai:MODEL, openai-responses:MODEL, openai-chat:MODEL, script:PATH, replay:PATH";

impl ModelSpec {
    /// Reads `PROVIDER:NAME`; an error names the providers it knows.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let Some((provider, rest)) = spec.split_once(':') else {
            return Err(format!(
                "`{spec}` is not a model spec; use PROVIDER:NAME ({KNOWN}), e.g. anthropic:claude-sonnet-4-5"
            ));
        };
        if rest.trim().is_empty() {
            return Err(format!(
                "`{spec}` names no model or file after `{provider}:`"
            ));
        }
        match provider {
            "script" => Ok(ModelSpec::Script(PathBuf::from(rest))),
            "replay" => Ok(ModelSpec::Replay(PathBuf::from(rest))),
            "anthropic" => Ok(ModelSpec::Anthropic(rest.to_string())),
            "openai" => Ok(ModelSpec::OpenAi(rest.to_string())),
            "openai-chat" => Ok(ModelSpec::OpenAiChat(rest.to_string())),
            "openai-responses" => Ok(ModelSpec::OpenAiResponses(rest.to_string())),
            _ => Err(format!(
                "unknown model provider `{provider}` in `{spec}`; known: {KNOWN}"
            )),
        }
    }

    /// The model of an OpenAI-compatible spec, whichever API it takes.
    pub fn openai_model(&self) -> Option<&str> {
        match self {
            ModelSpec::OpenAi(model)
            | ModelSpec::OpenAiChat(model)
            | ModelSpec::OpenAiResponses(model) => Some(model),
            _ => None,
        }
    }
}

/// How to reach a real model; ignored by scripts and replays.
#[derive(Debug, Clone)]
pub struct ModelOptions {
    /// The most tokens of one reply (`--max-tokens`); room for thinking is added, and against a
    /// small context window it is lowered.
    pub max_tokens: u32,
    /// How an OpenAI-compatible server is told `max_tokens`; None chooses by model name.
    pub token_limit: Option<openai::TokenLimit>,
    /// Retries of a failed call after the first attempt.
    pub max_retries: u32,
    /// How long to wait for bytes of a reply; a reply that is not streamed must come whole within
    /// it.
    pub request_timeout: Duration,
    /// Where to record every request and response, for `replay:`; None records nothing.
    pub record: Option<PathBuf>,
    /// The context window the user gave; when None, a local server is asked for it.
    pub context_window: Option<u64>,
    /// Ask for replies as server-sent events and show their text on stderr as it arrives.
    pub stream: bool,
    /// How hard the model thinks; its tokens are made room for in the reply's limit.
    pub reasoning: super::Reasoning,
}

/// The most output tokens Anthropic's SDKs allow a request that is not streamed: beyond it,
/// a reply may outlast the API's ten minutes for a non-streaming call.
pub const MAX_TOKENS_WITHOUT_STREAM: u32 = 21_333;

/// The context window of an `openai:` model behind a server that is not OpenAI's, when the
/// user gave none: the server's, else the published one of a model we know, else the user
/// must say. None for every other model (their windows are published).
fn local_window(
    spec: &ModelSpec,
    options: &ModelOptions,
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<window::Found>, String> {
    let Some(model) = spec.openai_model() else {
        return Ok(None);
    };
    let non_empty = |name: &str| get(name).filter(|v| !v.trim().is_empty());
    let Some(base) = non_empty("OPENAI_BASE_URL")
        .filter(|b| b.trim_end_matches('/') != openai::DEFAULT_BASE_URL)
    else {
        return Ok(None);
    };
    if options.context_window.is_some() {
        return Ok(None);
    }
    let key = non_empty("OPENAI_API_KEY");
    match window::ask_server(&base, model, key.as_deref()) {
        Ok(found) => Ok(Some(found)),
        // Nothing there to run the model: that is what to say, not the window.
        Err(window::NotAsked::Unreachable(why)) => Err(why),
        Err(window::NotAsked::Unsaid(why)) => match window::published(model) {
            Some(tokens) => Ok(Some(window::Found {
                tokens,
                source: format!("the published window of {model} (the server did not say)"),
                warning: None,
            })),
            None => Err(format!(
                "{why}; pass --context-window TOKENS (or run `git config \
                 agent-git.contextWindow TOKENS`) with the window the server runs the model with"
            )),
        },
    }
}

/// The reply's token limit must leave room for the conversation: against a small window it
/// is lowered to a quarter of it, and the report says so.
fn fit_max_tokens(options: &ModelOptions, window: Option<u64>) -> (u32, Option<String>) {
    let Some(window) = window else {
        return (options.max_tokens, None);
    };
    let quarter = u32::try_from(window / 4).unwrap_or(u32::MAX).max(1);
    if options.max_tokens <= quarter {
        return (options.max_tokens, None);
    }
    let note = format!(
        "max_tokens lowered from {} to {quarter}, a quarter of the {window}-token context window",
        options.max_tokens
    );
    (quarter, Some(note))
}

/// Reads what a provider needs from the environment. `get` is `std::env::var` outside tests.
fn provider_for(
    spec: &ModelSpec,
    options: &ModelOptions,
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<Box<dyn Provider>, String> {
    let non_empty = |name: &str| get(name).filter(|v| !v.trim().is_empty());
    match spec {
        ModelSpec::Anthropic(model) => {
            let api_key = non_empty("ANTHROPIC_API_KEY").ok_or(
                "ANTHROPIC_API_KEY is not set; export your Anthropic API key, or choose another --model",
            )?;
            Ok(Box::new(Anthropic {
                model: model.clone(),
                max_tokens: options.max_tokens,
                base_url: non_empty("ANTHROPIC_BASE_URL")
                    .unwrap_or_else(|| anthropic::DEFAULT_BASE_URL.into()),
                api_key,
                reasoning: options.reasoning,
            }))
        }
        ModelSpec::OpenAi(model)
        | ModelSpec::OpenAiChat(model)
        | ModelSpec::OpenAiResponses(model) => openai_provider(spec, model, options, get),
        ModelSpec::Script(_) | ModelSpec::Replay(_) => Err("not an HTTP model".into()),
    }
}

/// Whether an OpenAI-compatible spec takes the Responses API at `base`: `openai:` does for
/// OpenAI's reasoning models on OpenAI's own URL (Chat Completions drops their reasoning
/// between tool calls); local servers stay on Chat Completions, which all of them speak.
fn takes_responses(spec: &ModelSpec, base: &str) -> bool {
    match spec {
        ModelSpec::OpenAiResponses(_) => true,
        ModelSpec::OpenAi(model) => {
            base.trim_end_matches('/') == openai::DEFAULT_BASE_URL
                && openai::TokenLimit::for_model(model) == openai::TokenLimit::MaxCompletionTokens
        }
        _ => false,
    }
}

fn openai_provider(
    spec: &ModelSpec,
    model: &str,
    options: &ModelOptions,
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<Box<dyn Provider>, String> {
    let non_empty = |name: &str| get(name).filter(|v| !v.trim().is_empty());
    let base = non_empty("OPENAI_BASE_URL").unwrap_or_else(|| openai::DEFAULT_BASE_URL.into());
    let api_key = non_empty("OPENAI_API_KEY");
    // OpenAI's own API always wants a key; a local server (OPENAI_BASE_URL) may not.
    if api_key.is_none() && base.trim_end_matches('/') == openai::DEFAULT_BASE_URL {
        return Err(
            "OPENAI_API_KEY is not set; export your OpenAI API key, or point \
                    OPENAI_BASE_URL at a local server (Ollama, vLLM, llama.cpp)"
                .into(),
        );
    }
    let effort = match options.reasoning {
        super::Reasoning::Effort(effort) => Some(effort),
        _ => None,
    };
    if takes_responses(spec, &base) {
        let mut provider = Responses::new(model, options.max_tokens, &base, api_key);
        provider.effort = effort;
        return Ok(Box::new(provider));
    }
    let mut provider = OpenAi::new(model, options.max_tokens, &base, api_key);
    if let Some(limit) = options.token_limit {
        provider.token_limit = limit;
    }
    provider.effort = effort;
    Ok(Box::new(provider))
}

/// Whether what `spec` needs from the environment is there (an API key, where its provider
/// wants one), without opening it: an HTTP client takes some milliseconds to make, and a run
/// asks this before it starts work that a plan ending in an error would wait for.
pub fn check_credentials(spec: &ModelSpec, options: &ModelOptions) -> Result<(), String> {
    match spec {
        ModelSpec::Script(_) | ModelSpec::Replay(_) => Ok(()),
        _ => provider_for(spec, options, &crate::secrets::var).map(drop),
    }
}

/// The model `spec` names, ready to answer; an error says why it cannot be used (an unreadable
/// script, a token limit it cannot take, a recording asked of a script).
pub fn open_model(spec: &ModelSpec, options: &ModelOptions) -> Result<Box<dyn Model>, String> {
    let offline = |kind: &str| {
        if options.record.is_some() {
            Err(format!(
                "--record saves the requests of anthropic: and openai: models; a {kind} makes none"
            ))
        } else {
            Ok(())
        }
    };
    match spec {
        ModelSpec::Script(path) => {
            offline("script")?;
            Ok(Box::new(ScriptedModel::from_file(path)?))
        }
        ModelSpec::Replay(path) => {
            offline("replay")?;
            Ok(Box::new(ReplayModel::from_file(path)?))
        }
        ModelSpec::Anthropic(_)
        | ModelSpec::OpenAi(_)
        | ModelSpec::OpenAiChat(_)
        | ModelSpec::OpenAiResponses(_) => {
            let with_thinking = options.reasoning.max_tokens(options.max_tokens)?;
            if !options.stream
                && matches!(spec, ModelSpec::Anthropic(_))
                && with_thinking > MAX_TOKENS_WITHOUT_STREAM
            {
                let thinking = match with_thinking == options.max_tokens {
                    true => String::new(),
                    false => format!(" (with room for thinking, {with_thinking})"),
                };
                return Err(format!(
                    "--max-tokens {}{thinking} needs a streamed reply: without streaming, \
                     Anthropic allows at most {MAX_TOKENS_WITHOUT_STREAM}; drop --no-stream, \
                     lower --max-tokens or --thinking",
                    options.max_tokens
                ));
            }
            let options = &ModelOptions {
                max_tokens: with_thinking,
                ..options.clone()
            };
            let found = local_window(spec, options, &crate::secrets::var)?;
            let local = found.as_ref().map(|f| f.tokens).or(match spec {
                ModelSpec::Anthropic(_) => None,
                _ => options.context_window,
            });
            let (max_tokens, lowered) = fit_max_tokens(options, local);
            let options = &ModelOptions {
                max_tokens,
                ..options.clone()
            };
            let provider = provider_for(spec, options, &crate::secrets::var)?;
            let recorder =
                match &options.record {
                    Some(path) => Some(Recorder::create(path, provider.as_ref()).map_err(|e| {
                        format!("cannot create the recording {}: {e}", path.display())
                    })?),
                    None => None,
                };
            let retry = RetryPolicy {
                max_retries: options.max_retries,
                ..RetryPolicy::default()
            };
            let mut model = HttpModel::new(provider, options.request_timeout, retry, recorder)?;
            if let Some(found) = found {
                if let Some(warning) = &found.warning {
                    eprintln!("agent-git: warning: {warning}");
                }
                model.set_context_window(found);
            }
            model.add_notes(lowered);
            if options.stream {
                use std::io::IsTerminal;
                let terminal = std::io::stderr().is_terminal();
                model.stream_to(Box::new(IndentedEcho::new(std::io::stderr(), terminal)));
            }
            Ok(Box::new(model))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_provider_and_rejects_others() {
        assert_eq!(
            ModelSpec::parse("script:a/b.json"),
            Ok(ModelSpec::Script(PathBuf::from("a/b.json")))
        );
        assert_eq!(
            ModelSpec::parse("replay:r.jsonl"),
            Ok(ModelSpec::Replay(PathBuf::from("r.jsonl")))
        );
        assert_eq!(
            ModelSpec::parse("anthropic:claude-sonnet-4-5"),
            Ok(ModelSpec::Anthropic("claude-sonnet-4-5".into()))
        );
        assert_eq!(
            ModelSpec::parse("openai:llama3.1:8b"),
            Ok(ModelSpec::OpenAi("llama3.1:8b".into()))
        );
        assert_eq!(
            ModelSpec::parse("openai-responses:gpt-5"),
            Ok(ModelSpec::OpenAiResponses("gpt-5".into()))
        );
        assert_eq!(
            ModelSpec::parse("openai-chat:gpt-5"),
            Ok(ModelSpec::OpenAiChat("gpt-5".into()))
        );
        assert!(ModelSpec::parse("script:")
            .unwrap_err()
            .contains("names no model"));
        assert!(ModelSpec::parse("gpt")
            .unwrap_err()
            .contains("not a model spec"));
        assert!(ModelSpec::parse("foo:bar")
            .unwrap_err()
            .contains("unknown model provider `foo`"));
    }

    fn options() -> ModelOptions {
        ModelOptions {
            max_tokens: 10,
            token_limit: None,
            max_retries: 0,
            request_timeout: Duration::from_secs(1),
            record: None,
            context_window: None,
            stream: true,
            reasoning: Default::default(),
        }
    }

    #[test]
    fn providers_take_keys_and_urls_from_the_environment() {
        let none = |_: &str| None;
        let err = provider_for(&ModelSpec::Anthropic("m".into()), &options(), &none)
            .err()
            .unwrap();
        assert!(err.contains("ANTHROPIC_API_KEY is not set"), "{err}");
        let err = provider_for(&ModelSpec::OpenAi("gpt-4.1".into()), &options(), &none)
            .err()
            .unwrap();
        assert!(err.contains("OPENAI_API_KEY is not set"), "{err}");
        let env = |name: &str| match name {
            "ANTHROPIC_API_KEY" => Some("sk-a".to_string()),
            "OPENAI_BASE_URL" => Some("http://127.0.0.1:11434/v1".to_string()),
            _ => None,
        };
        let a = provider_for(&ModelSpec::Anthropic("m".into()), &options(), &env).unwrap();
        assert_eq!(a.url(), "https://api.anthropic.com/v1/messages");
        assert_eq!(
            a.headers(),
            vec![
                ("x-api-key", "sk-a".to_string()),
                ("anthropic-version", "2023-06-01".to_string())
            ]
        );
        let o = provider_for(&ModelSpec::OpenAi("llama3.1".into()), &options(), &env).unwrap();
        assert_eq!(o.url(), "http://127.0.0.1:11434/v1/chat/completions");
        assert_eq!(o.headers(), vec![], "a local server needs no key");
    }

    /// `openai:` takes the Responses API for OpenAI's reasoning models on OpenAI's own URL,
    /// Chat Completions otherwise; `openai-responses:` and `openai-chat:` choose.
    #[test]
    fn openai_specs_choose_their_api_by_model_and_url() {
        let on_openai = |name: &str| match name {
            "OPENAI_API_KEY" => Some("sk-o".to_string()),
            "OPENAI_BASE_URL" => Some("https://api.openai.com/v1/".to_string()),
            _ => None,
        };
        let unset = |name: &str| (name == "OPENAI_API_KEY").then(|| "sk-o".to_string());
        let local = |name: &str| {
            (name == "OPENAI_BASE_URL").then(|| "http://127.0.0.1:8000/v1".to_string())
        };
        let api = |spec: &str, get: &dyn Fn(&str) -> Option<String>| {
            let spec = ModelSpec::parse(spec).unwrap();
            let provider = provider_for(&spec, &options(), get).unwrap();
            (provider.name(), provider.url())
        };
        let responses = (
            "openai-responses",
            "https://api.openai.com/v1/responses".to_string(),
        );
        let chat = (
            "openai",
            "https://api.openai.com/v1/chat/completions".to_string(),
        );
        assert_eq!(api("openai:gpt-5", &unset), responses);
        assert_eq!(api("openai:o4-mini", &on_openai), responses.clone());
        assert_eq!(api("openai:gpt-4.1", &unset), chat);
        assert_eq!(api("openai-chat:gpt-5", &unset), chat);
        assert_eq!(api("openai-responses:gpt-4.1", &on_openai), responses);
        let local_chat = (
            "openai",
            "http://127.0.0.1:8000/v1/chat/completions".to_string(),
        );
        assert_eq!(
            api("openai:gpt-5", &local),
            local_chat,
            "local servers stay on chat"
        );
        assert_eq!(
            api("openai-responses:gpt-oss-20b", &local),
            (
                "openai-responses",
                "http://127.0.0.1:8000/v1/responses".to_string()
            )
        );
        let none = |_: &str| None;
        for spec in [
            "openai-responses:gpt-5",
            "openai-chat:gpt-5",
            "openai:gpt-5",
        ] {
            let spec = ModelSpec::parse(spec).unwrap();
            let err = provider_for(&spec, &options(), &none).err().unwrap();
            assert!(err.contains("OPENAI_API_KEY is not set"), "{err}");
        }
        // The effort asked is sent as the Responses API takes it.
        let effort = ModelOptions {
            reasoning: super::super::Reasoning::Effort(super::super::Effort::High),
            ..options()
        };
        let spec = ModelSpec::parse("openai:gpt-5").unwrap();
        let body = provider_for(&spec, &effort, &unset)
            .unwrap()
            .body(&super::super::Request {
                system: "S",
                messages: &[],
                tools: &[],
            });
        assert_eq!(body["reasoning"], serde_json::json!({"effort": "high"}));
    }
}
