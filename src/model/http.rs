//! Models behind an HTTP API: one request per reply, retried when the failure is transient,
//! optionally recorded for replay. A `Provider` knows one API's shapes; this file knows HTTP.

use super::errors::{context_overflow, read_error_body, transport_cause};
use super::responses_stream::ResponsesStream;
use super::retry::{jitter, parse_retry_after, Failure, RetryPolicy};
use super::stream::{read_stream, AnthropicStream, OpenAiStream, StreamError, StreamFailure};
use super::{Echo, Model, ModelError, Reply, Request};
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// One API's request and response shapes. Pure: no I/O, so tests compare whole values.
pub trait Provider: Send + Sync {
    /// `anthropic`, `openai` (Chat Completions) or `openai-responses`: a spec's prefix.
    fn name(&self) -> &'static str;
    /// The model's name, as the API is told it.
    fn model(&self) -> &str;
    /// Where each request is posted.
    fn url(&self) -> String;
    /// Headers to send, secrets included; never recorded.
    fn headers(&self) -> Vec<(&'static str, String)>;
    /// The request's JSON body, asking for a whole reply.
    fn body(&self, request: &Request<'_>) -> Value;
    /// The same body, asking for the reply as server-sent events.
    fn streamed(&self, body: &Value) -> Value;
    /// Reads the reply from a response body (a streamed reply is assembled into that body first);
    /// `BadResponse` when it holds none.
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
    /// Makes the recording at `path` (replacing a file there), its first line naming the provider
    /// and model.
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

/// A model behind an HTTP API: one request per reply, retried while the failure is transient,
/// streamed where asked, recorded where asked.
pub struct HttpModel {
    provider: Box<dyn Provider>,
    client: reqwest::Client,
    retry: RetryPolicy,
    recorder: Option<Recorder>,
    calls: u32,
    /// Replies that came without a token count: their cost cannot be known.
    uncounted: u32,
    /// Where streamed text is shown as it arrives; None asks for whole replies.
    echo: Option<Box<dyn Echo>>,
    timeout: Duration,
    /// The window a local server named, and what the report says of it.
    context_window: Option<u64>,
    notes: Vec<String>,
}

/// Every HTTP client of agent-git starts here: rustls on ring, which is installed as the
/// process's crypto provider the first time (reqwest is built without one of its own).
pub fn client_builder() -> reqwest::ClientBuilder {
    static PROVIDER: std::sync::Once = std::sync::Once::new();
    PROVIDER.call_once(|| {
        // An error means a provider is installed already, which is all that is needed.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
}

impl HttpModel {
    /// A model of `provider`'s API: `timeout` bounds each wait for bytes (and a whole reply that is
    /// not streamed), `retry` says when to try again. Errs when the HTTP client cannot be set up.
    pub fn new(
        provider: Box<dyn Provider>,
        timeout: Duration,
        retry: RetryPolicy,
        recorder: Option<Recorder>,
    ) -> Result<Self, String> {
        // The timeout bounds each wait for bytes; a whole reply's time is bounded per request
        // when it is not streamed (a long stream may rightly take longer).
        // No redirects: reqwest would forward `x-api-key` to another host.
        let client = client_builder()
            .redirect(reqwest::redirect::Policy::none())
            .read_timeout(timeout)
            .connect_timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| format!("cannot set up the HTTP client: {e}"))?;
        Ok(HttpModel {
            provider,
            client,
            retry,
            recorder,
            calls: 0,
            uncounted: 0,
            echo: None,
            timeout,
            context_window: None,
            notes: Vec::new(),
        })
    }

    /// What the report should say of this model beyond its name.
    pub fn add_notes(&mut self, notes: impl IntoIterator<Item = String>) {
        self.notes.extend(notes);
    }

    /// Takes `found` as the model's context window, and notes for the report where it came from
    /// (and any warning).
    pub fn set_context_window(&mut self, found: super::window::Found) {
        self.context_window = Some(found.tokens);
        self.notes.push(format!(
            "context window: {} tokens, from {}",
            found.tokens, found.source
        ));
        self.notes.extend(found.warning);
    }

    /// Streams replies, showing their text through `echo` as it arrives.
    pub fn stream_to(&mut self, echo: Box<dyn Echo>) {
        self.echo = Some(echo);
    }

    /// One attempt: the status, the retry headers and the body, or a transport error.
    async fn attempt(&mut self, body: &Value) -> Result<(u16, Failure, Body), reqwest::Error> {
        let mut request = match &self.echo {
            Some(_) => self
                .client
                .post(self.provider.url())
                .json(&self.provider.streamed(body)),
            None => self
                .client
                .post(self.provider.url())
                .json(body)
                .timeout(self.timeout),
        };
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
        let events = header("content-type").is_some_and(|t| t.starts_with("text/event-stream"));
        let echo = self
            .echo
            .as_mut()
            .filter(|_| events && (200..300).contains(&status));
        let Some(echo) = echo else {
            // An error, or a server that ignored `stream` and sent the whole reply.
            return Ok((status, failure, Body::Whole(response.text().await?)));
        };
        // Ended however the stream ends, Ctrl-C (which drops this future) included.
        let ending = Ending(echo);
        let mut show = |piece: &str| ending.0.text(piece);
        let bytes = response.bytes_stream();
        let assembled = match self.provider.name() {
            "anthropic" => read_stream(AnthropicStream::default(), bytes, &mut show).await,
            "openai-responses" => read_stream(ResponsesStream::default(), bytes, &mut show).await,
            _ => read_stream(OpenAiStream::default(), bytes, &mut show).await,
        };
        Ok((status, failure, Body::Streamed(assembled)))
    }

    fn describe(&self, status: u16, body: &str, attempts: u32) -> String {
        let error = read_error_body(body);
        let mut text = format!(
            "call {} to {} failed with HTTP {status}",
            self.calls,
            self.provider.name()
        );
        if attempts > 1 {
            text.push_str(&format!(
                " after {}",
                crate::text::count(attempts, "attempt")
            ));
        }
        let said = error.said();
        if !said.is_empty() {
            text.push_str(&format!(": {said}"));
        }
        let hint = if error.html {
            Some(format!(
                "a web page came back, not the API's answer: check {}_BASE_URL and any proxy \
                 in between",
                base_url_variable(self.provider.name())
            ))
        } else {
            token_param_hint(status, &said).or_else(|| self.provider.hint(status))
        };
        if let Some(hint) = hint {
            text.push_str(&format!(" ({hint})"));
        }
        text
    }

    /// Sends the request until it is answered, retrying what may pass on a second try.
    async fn exchange(&mut self, body: &Value) -> Result<Reply, ModelError> {
        let mut retries = 0;
        loop {
            let (failure, why) = match self.attempt(body).await {
                Ok((_, _, Body::Streamed(Err(broken)))) => {
                    if let Some(overflow) = overflow_in_stream(&broken) {
                        return Err(overflow);
                    }
                    (Failure::default(), self.stream_failed(&broken))
                }
                Ok((status, failure, whole_or_streamed)) => {
                    let text = match whole_or_streamed {
                        Body::Whole(text) => text,
                        Body::Streamed(assembled) => {
                            assembled.map(|v| v.to_string()).unwrap_or_default()
                        }
                    };
                    // The recording holds the body asked for and the reply as one body, so a
                    // streamed run replays like a whole one.
                    if let Some(recorder) = &mut self.recorder {
                        recorder.record(body, Some(status), &text);
                    }
                    match self.read_answer(status, failure, &text, retries + 1) {
                        Ok(reply) => {
                            if reply.usage == super::Usage::default() {
                                self.uncounted += 1;
                            }
                            return Ok(reply);
                        }
                        Err(Answer::Final(error)) => return Err(error),
                        Err(Answer::Retry(failure, why)) => (failure, why),
                    }
                }
                Err(e) => {
                    let why = format!(
                        "call {} to {}: {}",
                        self.calls,
                        self.provider.name(),
                        transport_cause(&e, &self.provider.url())
                    );
                    (Failure::default(), why)
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

    /// Why a stream gave no reply. One cut after it began lost part of a reply: the whole
    /// request goes again, and the report says so.
    fn stream_failed(&mut self, broken: &StreamFailure) -> String {
        if broken.events_arrived {
            self.notes.push(format!(
                "call {}: the reply stream failed after it began ({}); the whole request was \
                 sent again",
                self.calls, broken.error
            ));
        }
        format!("call {} to {}: {broken}", self.calls, self.provider.name())
    }

    /// A reply, or what to do about an answer that is not one.
    fn read_answer(
        &self,
        status: u16,
        failure: Failure,
        text: &str,
        attempts: u32,
    ) -> Result<Reply, Answer> {
        if (200..300).contains(&status) {
            // A 200 whose body is no reply (`{}`, an error object) is the server's fault, like
            // a 5xx: retried, never taken as a turn that ended.
            return self.provider.parse(text).map_err(|e| {
                let why = format!("call {} to {}: {e}", self.calls, self.provider.name());
                Answer::Retry(Failure::default(), why)
            });
        }
        if let Some(window) = context_overflow(status, text) {
            let message = read_error_body(text).message.unwrap_or_default();
            return Err(Answer::Final(ModelError::ContextOverflow {
                message,
                window,
            }));
        }
        Err(Answer::Retry(
            failure,
            self.describe(status, text, attempts),
        ))
    }
}

/// A server's error event that says the prompt is too long, as the error status would.
fn overflow_in_stream(broken: &StreamFailure) -> Option<ModelError> {
    let StreamError::Server { kind, message } = &broken.error else {
        return None;
    };
    let body = json!({"error": {"type": kind, "message": message}}).to_string();
    let window = context_overflow(400, &body)?;
    Some(ModelError::ContextOverflow {
        message: message.clone(),
        window,
    })
}

/// Ends the echo of a reply when dropped.
struct Ending<'a>(&'a mut Box<dyn Echo>);

impl Drop for Ending<'_> {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// A response body: read whole, or assembled from its stream.
enum Body {
    Whole(String),
    Streamed(Result<Value, StreamFailure>),
}

/// An answer that is not a reply: given up on at once, or worth another try.
enum Answer {
    Final(ModelError),
    Retry(Failure, String),
}

#[async_trait::async_trait]
impl Model for HttpModel {
    fn label(&self) -> String {
        format!("{}:{}", self.provider.name(), self.provider.model())
    }

    fn model_name(&self) -> Option<String> {
        Some(self.provider.model().to_string())
    }

    fn context_window(&self) -> Option<u64> {
        self.context_window
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = self.notes.clone();
        if self.uncounted > 0 {
            notes.push(format!(
                "{} replies (of {} calls) came without a token count: their cost is not in the \
                 total, and --max-cost cannot count it",
                self.uncounted, self.calls
            ));
        }
        notes
    }

    async fn reply(&mut self, request: &Request<'_>) -> Result<Reply, ModelError> {
        self.calls += 1;
        let body = self.provider.body(request);
        self.exchange(&body).await
    }
}
/// The variable that holds a provider's URL: both OpenAI APIs share `OPENAI_BASE_URL`.
fn base_url_variable(provider: &str) -> String {
    let family = provider.split('-').next().unwrap_or(provider);
    family.to_ascii_uppercase()
}

/// What to set when a server refuses the name of the reply's token limit: OpenAI's reasoning
/// models want `max_completion_tokens`, many other servers know only `max_tokens`.
fn token_param_hint(status: u16, said: &str) -> Option<String> {
    if status != 400 {
        return None;
    }
    let set = |param: &str| {
        format!("this server takes `{param}`: run `git config agent-git.tokenParam {param}`")
    };
    if said.contains("'max_completion_tokens'") && said.contains("max_tokens") {
        return Some(set("max_completion_tokens"));
    }
    let refused = [
        "Unrecognized",
        "Unsupported",
        "unknown",
        "not supported",
        "Extra inputs",
    ];
    if said.contains("max_completion_tokens") && refused.iter().any(|r| said.contains(r)) {
        return Some(set("max_tokens"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_token_limit_name_points_at_the_setting() {
        let openai = "invalid_request_error: Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.";
        assert_eq!(
            token_param_hint(400, openai).as_deref(),
            Some("this server takes `max_completion_tokens`: run `git config agent-git.tokenParam max_completion_tokens`")
        );
        let older = "Unrecognized request argument supplied: max_completion_tokens";
        assert_eq!(
            token_param_hint(400, older).as_deref(),
            Some(
                "this server takes `max_tokens`: run `git config agent-git.tokenParam max_tokens`"
            )
        );
        assert_eq!(
            token_param_hint(400, "max_tokens: must be at most 64000"),
            None
        );
        assert_eq!(token_param_hint(500, openai), None);
    }

    #[test]
    fn both_openai_apis_name_openai_base_url() {
        assert_eq!(base_url_variable("openai-responses"), "OPENAI");
        assert_eq!(base_url_variable("openai"), "OPENAI");
        assert_eq!(base_url_variable("anthropic"), "ANTHROPIC");
    }
}
