//! Models behind an HTTP API: one request per reply, retried when the failure is transient,
//! optionally recorded for replay. A `Provider` knows one API's shapes; this file knows HTTP.

use super::retry::{jitter, parse_retry_after, Failure, RetryPolicy};
use super::{Model, ModelError, Reply, Request};
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// One API's request and response shapes. Pure: no I/O, so tests compare whole values.
pub trait Provider: Send + Sync {
    /// `anthropic` or `openai`: the spec's prefix.
    fn name(&self) -> &'static str;
    fn model(&self) -> &str;
    fn url(&self) -> String;
    /// Headers to send, secrets included; never recorded.
    fn headers(&self) -> Vec<(&'static str, String)>;
    fn body(&self, request: &Request<'_>) -> Value;
    fn parse(&self, body: &str) -> Result<Reply, ModelError>;
    /// What to tell the user for an error status, e.g. which key to check.
    fn hint(&self, status: u16) -> Option<String>;
}

/// Appends every exchange to a JSON Lines file as it happens, so a crash keeps what was seen.
/// Only bodies and statuses are written: never a header, so never a key.
pub struct Recorder {
    file: std::fs::File,
}

impl Recorder {
    pub fn create(path: &Path, provider: &dyn Provider) -> std::io::Result<Self> {
        let mut file = std::fs::File::create(path)?;
        let header = json!({"agent_git_recording": 1, "provider": provider.name(), "model": provider.model()});
        writeln!(file, "{header}")?;
        Ok(Recorder { file })
    }

    fn record(&mut self, request: &Value, status: Option<u16>, response: &str) {
        let response = serde_json::from_str::<Value>(response)
            .unwrap_or_else(|_| Value::String(response.to_string()));
        let line = json!({"request": request, "status": status, "response": response});
        // A recording is a convenience: failing to write it must not fail the run.
        let _ = writeln!(self.file, "{line}").and_then(|_| self.file.flush());
    }
}

pub struct HttpModel {
    provider: Box<dyn Provider>,
    client: reqwest::Client,
    retry: RetryPolicy,
    recorder: Option<Recorder>,
    calls: u32,
}

impl HttpModel {
    pub fn new(
        provider: Box<dyn Provider>,
        timeout: Duration,
        retry: RetryPolicy,
        recorder: Option<Recorder>,
    ) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| format!("cannot set up the HTTP client: {e}"))?;
        Ok(HttpModel {
            provider,
            client,
            retry,
            recorder,
            calls: 0,
        })
    }

    /// One attempt: the status, the retry headers and the body, or a transport error.
    async fn attempt(&self, body: &Value) -> Result<(u16, Failure, String), reqwest::Error> {
        let mut request = self.client.post(self.provider.url()).json(body);
        for (name, value) in self.provider.headers() {
            request = request.header(name, value);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let failure = Failure {
            status: Some(status),
            should_retry: header("x-should-retry").map(|v| v.trim() == "true"),
            retry_after: parse_retry_after(
                header("retry-after-ms").as_deref(),
                header("retry-after").as_deref(),
            ),
        };
        let text = response.text().await?;
        Ok((status, failure, text))
    }

    fn describe(&self, status: u16, body: &str, attempts: u32) -> String {
        let (kind, message) = error_fields(body);
        let mut text = format!(
            "call {} to {} failed with HTTP {status}",
            self.calls,
            self.provider.name()
        );
        if attempts > 1 {
            text.push_str(&format!(" after {attempts} attempts"));
        }
        if let Some(kind) = kind {
            text.push_str(&format!(": {kind}"));
        }
        if let Some(message) = message {
            text.push_str(&format!(": {message}"));
        }
        if let Some(hint) = self.provider.hint(status) {
            text.push_str(&format!(" ({hint})"));
        }
        text
    }
}

/// The error type and message of an API error body, in either provider's shape.
fn error_fields(body: &str) -> (Option<String>, Option<String>) {
    let Ok(value) = serde_json::from_str::<Value>(body) else {
        let snippet: String = body.trim().chars().take(200).collect();
        return (None, (!snippet.is_empty()).then_some(snippet));
    };
    let error = &value["error"];
    let field = |key: &str| error[key].as_str().map(str::to_string);
    (field("type").or_else(|| field("code")), field("message"))
}

#[async_trait::async_trait]
impl Model for HttpModel {
    fn label(&self) -> String {
        format!("{}:{}", self.provider.name(), self.provider.model())
    }

    fn model_name(&self) -> Option<String> {
        Some(self.provider.model().to_string())
    }

    async fn reply(&mut self, request: &Request<'_>) -> Result<Reply, ModelError> {
        self.calls += 1;
        let body = self.provider.body(request);
        let mut retries = 0;
        loop {
            let (failure, why) = match self.attempt(&body).await {
                Ok((status, failure, text)) => {
                    if let Some(recorder) = &mut self.recorder {
                        recorder.record(&body, Some(status), &text);
                    }
                    if (200..300).contains(&status) {
                        return self.provider.parse(&text);
                    }
                    (failure, self.describe(status, &text, retries + 1))
                }
                Err(e) => {
                    let failure = Failure {
                        status: None,
                        should_retry: None,
                        retry_after: None,
                    };
                    let kind = if e.is_timeout() {
                        "timed out"
                    } else {
                        "could not connect"
                    };
                    let why = format!(
                        "call {} to {} {kind}: {e}",
                        self.calls,
                        self.provider.name()
                    );
                    (failure, why)
                }
            };
            match self.retry.delay(retries, failure, jitter()) {
                Some(wait) => {
                    eprintln!("agent-git: {why}; retrying in {:.1} s", wait.as_secs_f64());
                    tokio::time::sleep(wait).await;
                    retries += 1;
                }
                None => return Err(ModelError::Api(why)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_of_both_providers_are_read() {
        let anthropic =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(
            error_fields(anthropic),
            (Some("overloaded_error".into()), Some("Overloaded".into()))
        );
        let openai = r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        assert_eq!(
            error_fields(openai),
            (
                Some("invalid_request_error".into()),
                Some("Incorrect API key provided".into())
            )
        );
        assert_eq!(
            error_fields("<html>bad gateway</html>"),
            (None, Some("<html>bad gateway</html>".into()))
        );
    }
}
