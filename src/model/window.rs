//! The context window of a model behind a local OpenAI-compatible server, asked of the server
//! where it says: vLLM's `/v1/models` (`max_model_len`), llama.cpp's `/props` (`n_ctx`),
//! Ollama's `/api/ps` (the loaded model's `context_length`) or `/api/show` (`num_ctx`).

use serde_json::{json, Value};
use std::time::Duration;

/// A window a server named, where it was found, and what the user should know about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub tokens: u64,
    pub source: String,
    pub warning: Option<String>,
}

/// What a server answered, per endpoint: the body of a 2xx, else None.
#[derive(Debug, Default)]
pub struct Answers {
    pub models: Option<Value>,
    pub props: Option<Value>,
    pub ps: Option<Value>,
    pub show: Option<Value>,
    /// Why none of them answered at all, when none did.
    pub unreachable: Option<String>,
}

/// Reads the window from the servers' answers, or says why it cannot. Pure, so each server's
/// shape is a unit test.
pub fn read_window(model: &str, answers: &Answers) -> Result<Found, String> {
    let from_models = answers.models.as_ref().and_then(|v| {
        let entries = v["data"].as_array()?;
        let entry = entries.iter().find(|e| e["id"] == model)?;
        entry["max_model_len"].as_u64()
    });
    if let Some(tokens) = from_models {
        return Ok(found(
            tokens,
            "the server's /v1/models (max_model_len)",
            None,
        ));
    }
    let from_props = answers.props.as_ref().and_then(|v| {
        v["default_generation_settings"]["n_ctx"]
            .as_u64()
            .or_else(|| v["n_ctx"].as_u64())
    });
    if let Some(tokens) = from_props {
        return Ok(found(tokens, "the server's /props (n_ctx)", None));
    }
    match &answers.show {
        Some(show) if show.get("error").is_none() => {
            ollama_window(model, show, answers.ps.as_ref())
        }
        _ => Err(format!(
            "the server at OPENAI_BASE_URL did not say the context window of `{model}` (asked \
             /v1/models, /props, /api/ps and /api/show)"
        )),
    }
}

fn found(tokens: u64, source: &str, warning: Option<String>) -> Found {
    Found {
        tokens,
        source: source.to_string(),
        warning,
    }
}

/// Ollama cuts a prompt longer than its `num_ctx` from the front without an error, so the
/// window it runs the model with is what counts, not the model's own: the loaded model's
/// (`/api/ps`), else a Modelfile's `num_ctx`. Its server-wide default (`OLLAMA_CONTEXT_LENGTH`)
/// is shown nowhere else, so without either the user must say.
fn ollama_window(model: &str, show: &Value, ps: Option<&Value>) -> Result<Found, String> {
    let truncates = "Ollama silently cuts prompts longer than the window it runs a model with";
    let kept_under =
        |tokens: u64| format!("{truncates}; agent-git keeps the conversation under {tokens}");
    let loaded = ps.and_then(|ps| {
        let models = ps["models"].as_array()?;
        let entry = models
            .iter()
            .find(|m| m["name"] == model || m["model"] == model)?;
        entry["context_length"].as_u64()
    });
    if let Some(tokens) = loaded {
        let source = "Ollama's /api/ps (the loaded model's context_length)";
        return Ok(found(tokens, source, Some(kept_under(tokens))));
    }
    let num_ctx = show["parameters"].as_str().and_then(|text| {
        text.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("num_ctx")).then(|| words.next()?.parse::<u64>().ok())?
        })
    });
    match num_ctx {
        Some(tokens) => Ok(found(
            tokens,
            "Ollama's /api/show (num_ctx)",
            Some(kept_under(tokens)),
        )),
        None => Err(format!(
            "Ollama does not say the window it runs `{model}` with ({truncates}, and its default \
             is small unless the server was started with OLLAMA_CONTEXT_LENGTH); load the model \
             first (`ollama run {model}`) so that /api/ps shows it"
        )),
    }
}

/// Published context windows by model-name prefix, the first match wins.
const PUBLISHED: &[(&str, u64)] = &[
    ("claude-", 200_000),
    ("gpt-4.1", 1_000_000),
    ("gpt-5", 400_000),
    ("gpt-4o", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
];

/// The published context window of a model we know (a provider prefix such as `openai/` is
/// ignored); None otherwise.
pub fn published(model: &str) -> Option<u64> {
    let name = model.rsplit('/').next().unwrap_or(model);
    PUBLISHED
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|(_, tokens)| *tokens)
}

/// Why the server did not give a window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAsked {
    /// Nothing answered at its URL: no window would help.
    Unreachable(String),
    /// It answered, without a window of this model.
    Unsaid(String),
}

/// Asks the server at `base_url` (an OpenAI-style URL such as `http://host:11434/v1`).
pub fn ask_server(base_url: &str, model: &str, api_key: Option<&str>) -> Result<Found, NotAsked> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            NotAsked::Unsaid(format!("cannot ask the server for its context window: {e}"))
        })?;
    let answers = runtime.block_on(ask(base_url, model, api_key));
    if let Some(why) = answers.unreachable {
        return Err(NotAsked::Unreachable(why));
    }
    read_window(model, &answers).map_err(NotAsked::Unsaid)
}

/// Why no request to the server at `base` got an answer at all (the server is not running,
/// the URL is wrong), said as what happened at that URL.
fn unreachable(base: &str, error: &reqwest::Error) -> String {
    use std::error::Error;
    let mut cause = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        cause = inner.to_string();
        source = inner.source();
    }
    format!("cannot reach the model server at {base}: {cause}; start it, or fix OPENAI_BASE_URL")
}

/// The four endpoints at once: a server that answers none costs one timeout, not four.
async fn ask(base_url: &str, model: &str, api_key: Option<&str>) -> Answers {
    let Ok(client) = super::http::client_builder()
        .timeout(Duration::from_secs(5))
        .redirect(reqwest::redirect::Policy::none())
        .build()
    else {
        return Answers::default();
    };
    let base = base_url.trim_end_matches('/');
    let root = base.strip_suffix("/v1").unwrap_or(base);
    let with_key = |request: reqwest::RequestBuilder| match api_key {
        Some(key) => request.bearer_auth(key),
        None => request,
    };
    // Ok(None): the server answered, but not with a window; Err: no answer at all.
    let fetch = |request: reqwest::RequestBuilder| async move {
        let response = with_key(request).send().await?;
        if !response.status().is_success() {
            return Ok(None);
        }
        Ok::<_, reqwest::Error>(response.json::<Value>().await.ok())
    };
    let show = client
        .post(format!("{root}/api/show"))
        .json(&json!({"model": model}));
    let (models, props, ps, show) = tokio::join!(
        fetch(client.get(format!("{base}/models"))),
        fetch(client.get(format!("{root}/props"))),
        fetch(client.get(format!("{root}/api/ps"))),
        fetch(show),
    );
    let all = [&models, &props, &ps, &show];
    let unreachable = match all.iter().all(|answer| answer.is_err()) {
        true => models.as_ref().err().map(|e| unreachable(base, e)),
        false => None,
    };
    Answers {
        models: models.ok().flatten(),
        props: props.ok().flatten(),
        ps: ps.ok().flatten(),
        show: show.ok().flatten(),
        unreachable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_servers_shape_gives_its_window() {
        let vllm = json!({"object": "list", "data": [{"id": "Qwen/Qwen2.5-Coder-7B-Instruct",
            "object": "model", "created": 1, "owned_by": "vllm", "root": "Qwen/Qwen2.5-Coder-7B-Instruct",
            "parent": null, "max_model_len": 32768, "permission": []}]});
        let models = |v: &Value| Answers {
            models: Some(v.clone()),
            ..Answers::default()
        };
        assert_eq!(
            read_window("Qwen/Qwen2.5-Coder-7B-Instruct", &models(&vllm)),
            Ok(found(
                32768,
                "the server's /v1/models (max_model_len)",
                None
            ))
        );
        let other = read_window("other", &models(&vllm)).unwrap_err();
        assert!(
            other.contains("did not say the context window of `other`"),
            "{other}"
        );

        let llama_cpp = Answers {
            models: Some(
                json!({"object": "list", "data": [{"id": "model.gguf", "object": "model",
                "meta": {"n_ctx_train": 131072, "n_params": 7_000_000_000u64}}]}),
            ),
            props: Some(
                json!({"default_generation_settings": {"n_ctx": 8192, "params": {}},
                "total_slots": 1, "model_path": "model.gguf"}),
            ),
            ..Answers::default()
        };
        assert_eq!(
            read_window("model.gguf", &llama_cpp),
            Ok(found(8192, "the server's /props (n_ctx)", None))
        );
    }

    #[test]
    fn ollama_says_its_window_for_a_loaded_model_or_a_modelfile_only() {
        let show = |parameters: &str| {
            Some(
                json!({"modelfile": "FROM llama3.1", "parameters": parameters,
                   "details": {"family": "llama"},
                   "model_info": {"general.architecture": "llama", "llama.context_length": 131072}}),
            )
        };
        let ps = Some(
            json!({"models": [{"name": "llama3.1:8b", "model": "llama3.1:8b",
            "size": 6_654_289_920u64, "context_length": 32768, "expires_at": "2026-11-29T00:05:00Z"}]}),
        );
        let loaded = read_window(
            "llama3.1:8b",
            &Answers {
                ps: ps.clone(),
                show: show("num_ctx 16384"),
                ..Answers::default()
            },
        )
        .unwrap();
        assert_eq!(
            (loaded.tokens, loaded.source.as_str()),
            (
                32768,
                "Ollama's /api/ps (the loaded model's context_length)"
            )
        );
        let set = read_window(
            "llama3.1:8b",
            &Answers {
                show: show("num_ctx 16384\nstop \"<|eot_id|>\""),
                ..Answers::default()
            },
        )
        .unwrap();
        assert_eq!(
            (set.tokens, set.source.as_str()),
            (16384, "Ollama's /api/show (num_ctx)")
        );
        // The model's own 131072 is not the window Ollama runs it with.
        let unset = read_window(
            "qwen3:8b",
            &Answers {
                ps,
                show: show("stop \"x\""),
                ..Answers::default()
            },
        )
        .unwrap_err();
        assert!(
            unset.contains("load the model first (`ollama run qwen3:8b`)"),
            "{unset}"
        );
        let missing = Answers {
            show: Some(json!({"error": "model 'm' not found"})),
            ..Answers::default()
        };
        assert!(read_window("m", &missing)
            .unwrap_err()
            .contains("did not say"));
    }
}
