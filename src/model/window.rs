//! The context window of a model behind a local OpenAI-compatible server, asked of the server
//! where it says: vLLM's `/v1/models` (`max_model_len`), llama.cpp's `/props` (`n_ctx`),
//! Ollama's `/api/show` (`num_ctx`, or the model's `context_length`).

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
pub struct Answers {
    pub models: Option<Value>,
    pub props: Option<Value>,
    pub show: Option<Value>,
}

/// The endpoints asked, for the message when none answered.
pub const ASKED: &str = "/v1/models, /props and /api/show";

/// Reads the window from the servers' answers. Pure, so each server's shape is a unit test.
pub fn read_window(model: &str, answers: &Answers) -> Option<Found> {
    let from_models = answers.models.as_ref().and_then(|v| {
        let entries = v["data"].as_array()?;
        let entry = entries.iter().find(|e| e["id"] == model)?;
        entry["max_model_len"].as_u64()
    });
    if let Some(tokens) = from_models {
        return Some(found(
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
        return Some(found(tokens, "the server's /props (n_ctx)", None));
    }
    answers.show.as_ref().and_then(ollama_window)
}

fn found(tokens: u64, source: &str, warning: Option<String>) -> Found {
    Found {
        tokens,
        source: source.to_string(),
        warning,
    }
}

/// Ollama cuts a prompt longer than its `num_ctx` from the front without an error, so the
/// window it is run with matters more than the model's own.
fn ollama_window(show: &Value) -> Option<Found> {
    let num_ctx = show["parameters"].as_str().and_then(|text| {
        text.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("num_ctx")).then(|| words.next()?.parse::<u64>().ok())?
        })
    });
    let trained = show["model_info"].as_object().and_then(|info| {
        info.iter()
            .find(|(key, _)| key.ends_with(".context_length"))
            .and_then(|(_, v)| v.as_u64())
    });
    let truncates = "Ollama silently cuts prompts longer than its num_ctx";
    match (num_ctx, trained) {
        (Some(tokens), _) => Some(found(
            tokens,
            "Ollama's /api/show (num_ctx)",
            Some(format!(
                "{truncates}: this model runs with num_ctx {tokens}, and agent-git keeps the \
                 conversation under it"
            )),
        )),
        (None, Some(tokens)) => Some(found(
            tokens,
            "Ollama's /api/show (the model's context_length)",
            Some(format!(
                "{truncates}, which is the server's default (often 4096) unless \
                 OLLAMA_CONTEXT_LENGTH or a Modelfile sets it; agent-git assumes the model's \
                 {tokens}: start the server with OLLAMA_CONTEXT_LENGTH={tokens}, or pass \
                 --context-window with the server's num_ctx"
            )),
        )),
        (None, None) => None,
    }
}

/// Asks the server at `base_url` (an OpenAI-style URL such as `http://host:11434/v1`).
pub fn ask_server(base_url: &str, model: &str, api_key: Option<&str>) -> Option<Found> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    runtime.block_on(ask(base_url, model, api_key))
}

async fn ask(base_url: &str, model: &str, api_key: Option<&str>) -> Option<Found> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .ok()?;
    let base = base_url.trim_end_matches('/');
    let root = base.strip_suffix("/v1").unwrap_or(base);
    let with_key = |request: reqwest::RequestBuilder| match api_key {
        Some(key) => request.bearer_auth(key),
        None => request,
    };
    let fetch = |request: reqwest::RequestBuilder| async move {
        let response = with_key(request).send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        response.json::<Value>().await.ok()
    };
    let answers = Answers {
        models: fetch(client.get(format!("{base}/models"))).await,
        props: fetch(client.get(format!("{root}/props"))).await,
        show: fetch(
            client
                .post(format!("{root}/api/show"))
                .json(&json!({"model": model})),
        )
        .await,
    };
    read_window(model, &answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers(models: Option<Value>, props: Option<Value>, show: Option<Value>) -> Answers {
        Answers {
            models,
            props,
            show,
        }
    }

    #[test]
    fn each_servers_shape_gives_its_window() {
        let vllm = json!({"object": "list", "data": [{"id": "Qwen/Qwen2.5-Coder-7B-Instruct",
            "object": "model", "created": 1, "owned_by": "vllm", "root": "Qwen/Qwen2.5-Coder-7B-Instruct",
            "parent": null, "max_model_len": 32768, "permission": []}]});
        assert_eq!(
            read_window(
                "Qwen/Qwen2.5-Coder-7B-Instruct",
                &answers(Some(vllm.clone()), None, None)
            ),
            Some(found(
                32768,
                "the server's /v1/models (max_model_len)",
                None
            ))
        );
        assert_eq!(read_window("other", &answers(Some(vllm), None, None)), None);

        let llama_cpp_models = json!({"object": "list", "data": [{"id": "model.gguf", "object": "model",
            "meta": {"n_ctx_train": 131072, "n_params": 7_000_000_000u64}}]});
        let props = json!({"default_generation_settings": {"n_ctx": 8192, "params": {}},
            "total_slots": 1, "model_path": "model.gguf"});
        assert_eq!(
            read_window(
                "model.gguf",
                &answers(Some(llama_cpp_models), Some(props), None)
            ),
            Some(found(8192, "the server's /props (n_ctx)", None))
        );

        let show = |parameters: &str| {
            json!({"modelfile": "FROM llama3.1", "parameters": parameters,
                   "details": {"family": "llama"},
                   "model_info": {"general.architecture": "llama", "llama.context_length": 131072}})
        };
        let set = read_window(
            "llama3.1:8b",
            &answers(None, None, Some(show("num_ctx 16384\nstop \"<|eot_id|>\""))),
        )
        .unwrap();
        assert_eq!(
            (set.tokens, set.source.as_str()),
            (16384, "Ollama's /api/show (num_ctx)")
        );
        let unset = read_window(
            "llama3.1:8b",
            &answers(None, None, Some(show("stop \"x\""))),
        )
        .unwrap();
        assert_eq!(unset.tokens, 131072);
        assert!(unset
            .warning
            .unwrap()
            .contains("start the server with OLLAMA_CONTEXT_LENGTH=131072"));
        assert_eq!(
            read_window(
                "m",
                &answers(None, None, Some(json!({"error": "model not found"})))
            ),
            None
        );
    }
}
