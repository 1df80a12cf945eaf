//! Reading what went wrong with an API call: error bodies of every shape the providers and
//! the servers in front of them send, prompts that are too long, and transport failures.
//! Pure except for walking an error's sources.

use regex::Regex;
use serde_json::Value;
use std::sync::LazyLock;

fn built_in(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|e| panic!("bad built-in regex {pattern}: {e}"))
}

/// What an error body says, whatever its shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorBody {
    /// The error's type or code, e.g. `overloaded_error`, `context_length_exceeded`.
    pub kind: Option<String>,
    pub message: Option<String>,
    /// The body was a web page (a proxy or a wrong URL), not an API's JSON.
    pub html: bool,
}

/// Reads Anthropic's `{type: error, error: {type, message}}`, OpenAI's `{error: {message,
/// type, code}}`, vLLM's top-level `{object: error, message, type}`, llama.cpp's `{error:
/// {code, message, type}}`, an `{error: "text"}`, an HTML page, or plain text.
pub fn read_error_body(body: &str) -> ErrorBody {
    let Ok(value) = serde_json::from_str::<Value>(body) else {
        return not_json(body);
    };
    let text = |v: &Value| match v {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    let holder = match &value["error"] {
        Value::Object(_) => &value["error"],
        Value::String(message) => {
            return ErrorBody {
                kind: None,
                message: Some(message.clone()),
                html: false,
            }
        }
        _ => &value,
    };
    let kind = text(&holder["type"])
        .filter(|t| t != "error")
        .or_else(|| text(&holder["code"]));
    let message = text(&holder["message"]).or_else(|| text(&holder["detail"]));
    ErrorBody {
        kind,
        message,
        html: false,
    }
}

impl ErrorBody {
    /// The type and the message, `kind: message`, as far as the body said them.
    pub fn said(&self) -> String {
        let parts: Vec<&str> = [&self.kind, &self.message]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        parts.join(": ")
    }
}

/// A body that is an error object although its status says success: what it said.
pub fn error_with_success(body: &str) -> String {
    format!(
        "an error came with a success status: {}",
        read_error_body(body).said()
    )
}

fn not_json(body: &str) -> ErrorBody {
    static TITLE: LazyLock<Regex> = LazyLock::new(|| built_in(r"(?is)<title[^>]*>(.*?)</title>"));
    static TAG: LazyLock<Regex> = LazyLock::new(|| built_in(r"(?s)<[^>]*>"));
    let lower = body.trim_start().to_ascii_lowercase();
    let html = lower.starts_with("<!doctype html") || lower.starts_with("<html");
    let text = match TITLE.captures(body).filter(|_| html) {
        Some(title) => title[1].to_string(),
        None if html => TAG.replace_all(body, " ").into_owned(),
        None => body.to_string(),
    };
    let text: String = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(200)
        .collect();
    ErrorBody {
        kind: None,
        message: (!text.is_empty()).then_some(text),
        html,
    }
}

/// When an error says the prompt does not fit the model's context window: the window's size
/// in tokens when the message names it. The texts are the providers' own:
/// Anthropic `prompt is too long: 210000 tokens > 200000 maximum`, OpenAI
/// `context_length_exceeded`, vLLM `This model's maximum context length is 4096 tokens`,
/// llama.cpp `exceed_context_size_error` with `n_ctx`.
pub fn context_overflow(status: u16, body: &str) -> Option<Option<u64>> {
    if !matches!(status, 400 | 413 | 422) {
        return None;
    }
    let error = read_error_body(body);
    let message = error.message.as_deref().unwrap_or("").to_ascii_lowercase();
    // OpenAI-shaped errors name the overflow in `code`, beside a generic `type`.
    let value: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let holder = if value["error"].is_object() {
        &value["error"]
    } else {
        &value
    };
    let kinds = [&holder["type"], &holder["code"]];
    let named = kinds.iter().any(|k| {
        matches!(
            k.as_str(),
            Some("context_length_exceeded" | "exceed_context_size_error" | "request_too_large")
        )
    });
    let overflow = named
        || [
            "prompt is too long",
            "maximum context length",
            "exceeds the available context size",
            "context window",
            "exceed context limit",
            "reduce the length of the messages",
        ]
        .iter()
        .any(|phrase| message.contains(phrase));
    overflow.then(|| window_named(&message, body))
}

fn window_named(message: &str, body: &str) -> Option<u64> {
    static PATTERNS: LazyLock<[Regex; 5]> = LazyLock::new(|| {
        [
            built_in(r"tokens? > (\d+) maximum"),
            built_in(r"maximum context length is (\d+)"),
            built_in(r"context window of (\d+)"),
            built_in(r"\d+ \+ \d+ > (\d+)"),
            built_in(r"limit is (\d+)"),
        ]
    });
    let named = PATTERNS
        .iter()
        .find_map(|re| re.captures(message)?[1].parse().ok());
    named.or_else(|| {
        let value: Value = serde_json::from_str(body).ok()?;
        value["error"]["n_ctx"].as_u64()
    })
}

/// Why a request never got an answer, in words that point at the fix: the cause at the bottom
/// of reqwest's error, named (connection refused, DNS, TLS, timeout).
pub fn transport_cause(error: &reqwest::Error, url: &str) -> String {
    let mut sources: Vec<String> = Vec::new();
    let mut refused = false;
    let mut next: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(source) = next {
        if let Some(io) = source.downcast_ref::<std::io::Error>() {
            refused |= io.kind() == std::io::ErrorKind::ConnectionRefused;
        }
        sources.push(source.to_string());
        next = source.source();
    }
    let all = sources.join(": ").to_ascii_lowercase();
    let innermost = sources.last().cloned().unwrap_or_else(|| error.to_string());
    let origin = origin(url);
    if error.is_timeout() {
        format!("no answer in time from {origin} (raise --request-timeout for a slow server)")
    } else if refused || all.contains("connection refused") {
        format!("connection refused by {origin}: is the server running, and is the URL right?")
    } else if all.contains("dns error") || all.contains("failed to lookup address") {
        format!("the host of {origin} could not be resolved (DNS: {innermost}); check the URL")
    } else if all.contains("certificate") {
        format!("the TLS certificate of {origin} was not accepted: {innermost}")
    } else if all.contains("tls") || all.contains("handshake") || all.contains("corrupt message") {
        format!("the TLS handshake with {origin} failed: {innermost} (is it an https server?)")
    } else if error.is_connect() {
        format!("could not connect to {origin}: {innermost}")
    } else {
        format!("the exchange with {origin} failed: {innermost}")
    }
}

/// `scheme://host:port` of a URL, for messages: never a path or a query that may hold a key.
fn origin(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(parsed) => parsed.origin().ascii_serialization(),
        Err(_) => "the server".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(kind: Option<&str>, message: Option<&str>) -> ErrorBody {
        ErrorBody {
            kind: kind.map(String::from),
            message: message.map(String::from),
            html: false,
        }
    }

    #[test]
    fn error_bodies_of_every_shape_are_read() {
        let anthropic = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}"#;
        assert_eq!(
            read_error_body(anthropic),
            body(Some("overloaded_error"), Some("Overloaded"))
        );
        let openai = r#"{"error":{"message":"Incorrect API key provided: sk-abc.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#;
        assert_eq!(
            read_error_body(openai),
            body(
                Some("invalid_request_error"),
                Some("Incorrect API key provided: sk-abc.")
            )
        );
        let vllm = r#"{"object":"error","message":"The model `llama` does not exist.","type":"NotFoundError","param":null,"code":404}"#;
        assert_eq!(
            read_error_body(vllm),
            body(
                Some("NotFoundError"),
                Some("The model `llama` does not exist.")
            )
        );
        let ollama = r#"{"error":"model \"llama9\" not found, try pulling it first"}"#;
        assert_eq!(
            read_error_body(ollama),
            body(
                None,
                Some("model \"llama9\" not found, try pulling it first")
            )
        );
        let llama_cpp =
            r#"{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}"#;
        assert_eq!(
            read_error_body(llama_cpp),
            body(Some("unavailable_error"), Some("Loading model"))
        );
        let nginx = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";
        assert_eq!(
            read_error_body(nginx),
            ErrorBody {
                kind: None,
                message: Some("502 Bad Gateway".into()),
                html: true
            }
        );
        assert_eq!(
            read_error_body("<!DOCTYPE html><body><p>Access   denied</p></body>"),
            ErrorBody {
                kind: None,
                message: Some("Access denied".into()),
                html: true
            }
        );
        assert_eq!(
            read_error_body("upstream connect error"),
            body(None, Some("upstream connect error"))
        );
        assert_eq!(read_error_body(""), body(None, None));
        assert_eq!(read_error_body("{}"), body(None, None));
    }

    #[test]
    fn prompts_too_long_are_told_apart_and_their_windows_read() {
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 214315 tokens > 200000 maximum"}}"#;
        assert_eq!(context_overflow(400, anthropic), Some(Some(200_000)));
        let openai = r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        assert_eq!(context_overflow(400, openai), Some(Some(128_000)));
        let vllm = r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5120 tokens (4096 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#;
        assert_eq!(context_overflow(400, vllm), Some(Some(4096)));
        let llama_cpp = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}"#;
        assert_eq!(context_overflow(400, llama_cpp), Some(Some(8192)));
        let with_output = r#"{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, decrease input length or `max_tokens` and try again"}}"#;
        assert_eq!(context_overflow(400, with_output), Some(Some(200_000)));
        let groq = r#"{"error":{"message":"Please reduce the length of the messages or completion.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
        assert_eq!(context_overflow(400, groq), Some(None));
        let cerebras = r#"{"message":"Please reduce the length of the messages or completion. Current length is 42328 while limit is 40000","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}"#;
        assert_eq!(context_overflow(400, cerebras), Some(Some(40_000)));
        let too_large = r#"{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}"#;
        assert_eq!(context_overflow(413, too_large), Some(None));

        let other = r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: must be at most 64000"}}"#;
        assert_eq!(context_overflow(400, other), None);
        assert_eq!(context_overflow(500, anthropic), None, "only client errors");
    }

    #[test]
    fn origins_hide_paths_and_queries() {
        assert_eq!(
            origin("http://127.0.0.1:11434/v1/chat/completions?key=x"),
            "http://127.0.0.1:11434"
        );
        assert_eq!(origin("not a url"), "the server");
    }
}
