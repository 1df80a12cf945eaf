//! `replay:PATH`: answers with the responses of a recorded run and says where the new
//! requests part from the recorded ones. A regression test made from a real session.

use super::http::Provider;
use super::{Anthropic, Model, ModelError, OpenAi, Reply, Request, Responses, TokenLimit};
use serde_json::Value;
use std::collections::VecDeque;
use std::path::Path;

/// `replay:PATH`: answers each request with the next recorded response, and notes each request that
/// differs from the recorded one.
pub struct ReplayModel {
    label: String,
    provider: Box<dyn Provider>,
    exchanges: VecDeque<(Value, String)>,
    total: usize,
    calls: usize,
    divergences: Vec<String>,
}

impl ReplayModel {
    /// Reads the whole recording up front; only its exchanges answered with a 2xx status are
    /// replayed. An error says why the file is no recording.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the recording {}: {e}", path.display()))?;
        let bad =
            |what: String| format!("{} is not an agent-git recording: {what}", path.display());
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let header: Value = serde_json::from_str(lines.next().unwrap_or(""))
            .map_err(|e| bad(format!("first line: {e}")))?;
        if header["agent_git_recording"] != 1 {
            return Err(bad("no agent_git_recording header".into()));
        }
        let mut exchanges = VecDeque::new();
        for (i, line) in lines.enumerate() {
            let exchange: Value =
                serde_json::from_str(line).map_err(|e| bad(format!("line {}: {e}", i + 2)))?;
            let ok = exchange["status"]
                .as_u64()
                .is_some_and(|s| (200..300).contains(&s));
            if ok {
                let response = match &exchange["response"] {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                exchanges.push_back((exchange["request"].clone(), response));
            }
        }
        let model = header["model"].as_str().unwrap_or("").to_string();
        // Same token limit, in the same field, as recorded, so that unchanged requests
        // compare equal.
        let first = exchanges.front().map(|(request, _)| request);
        let completion = first.is_some_and(|r| r.get("max_completion_tokens").is_some());
        let max_tokens = first
            .and_then(|r| {
                r["max_tokens"]
                    .as_u64()
                    .or(r["max_completion_tokens"].as_u64())
                    .or(r["max_output_tokens"].as_u64())
            })
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(8192);
        // The same reasoning as recorded, for the same reason.
        let thinking = first.map(|r| &r["thinking"]);
        let reasoning = match thinking.and_then(|t| t["type"].as_str()) {
            Some("enabled") => super::Reasoning::Budget {
                tokens: thinking
                    .and_then(|t| t["budget_tokens"].as_u64())
                    .and_then(|n| u32::try_from(n).ok())
                    .unwrap_or(0),
                interleaved: false,
                max_output: u32::MAX,
            },
            Some("adaptive") => super::Reasoning::Adaptive {
                max_output: u32::MAX,
            },
            _ => super::Reasoning::Off,
        };
        let effort = first
            .and_then(|r| {
                r["reasoning_effort"]
                    .as_str()
                    .or(r["reasoning"]["effort"].as_str())
            })
            .and_then(|name| super::Effort::parse(name).ok());
        let provider: Box<dyn Provider> = match header["provider"].as_str() {
            Some("anthropic") => Box::new(Anthropic {
                model: model.clone(),
                max_tokens,
                base_url: String::new(),
                api_key: String::new(),
                reasoning,
            }),
            Some("openai") => {
                let mut openai = OpenAi::new(&model, max_tokens, "", None);
                openai.effort = effort;
                openai.token_limit = if completion {
                    TokenLimit::MaxCompletionTokens
                } else {
                    TokenLimit::MaxTokens
                };
                Box::new(openai)
            }
            Some("openai-responses") => {
                let mut responses = Responses::new(&model, max_tokens, "", None);
                responses.effort = effort;
                // The recorded run's key, so that its requests compare equal.
                if let Some(key) = first.and_then(|r| r["prompt_cache_key"].as_str()) {
                    responses.cache_key = key.to_string();
                }
                Box::new(responses)
            }
            other => return Err(bad(format!("unknown provider {other:?}"))),
        };
        Ok(ReplayModel {
            label: format!("replay:{} ({}:{model})", path.display(), provider.name()),
            provider,
            total: exchanges.len(),
            exchanges,
            calls: 0,
            divergences: Vec::new(),
        })
    }
}

/// Where two JSON values first differ, as a path like `messages[3].content[0].text`.
pub fn first_difference(recorded: &Value, new: &Value, path: &str) -> Option<String> {
    let here = || {
        if path.is_empty() {
            "(the whole request)".to_string()
        } else {
            path.to_string()
        }
    };
    match (recorded, new) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| {
                let sub = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => first_difference(x, y, &sub),
                    _ => Some(sub),
                }
            })
        }
        (Value::Array(a), Value::Array(b)) => {
            let common = a
                .iter()
                .zip(b)
                .enumerate()
                .find_map(|(i, (x, y))| first_difference(x, y, &format!("{path}[{i}]")));
            common.or_else(|| {
                (a.len() != b.len())
                    .then(|| format!("{} (length {} recorded, {} now)", here(), a.len(), b.len()))
            })
        }
        (a, b) if a == b => None,
        _ => Some(here()),
    }
}

#[async_trait::async_trait]
impl Model for ReplayModel {
    fn label(&self) -> String {
        self.label.clone()
    }

    async fn reply(&mut self, request: &Request<'_>) -> Result<Reply, ModelError> {
        self.calls += 1;
        let Some((recorded, response)) = self.exchanges.pop_front() else {
            return Err(ModelError::Replay(format!(
                "the recording holds {} responses and call {} asked for one more",
                self.total, self.calls
            )));
        };
        let body = self.provider.body(request);
        if let Some(path) = first_difference(&recorded, &body, "") {
            self.divergences.push(format!(
                "call {} differs from the recording at {path}",
                self.calls
            ));
        }
        self.provider.parse(&response)
    }

    /// The recorded model: its prices and context window apply to the replay.
    fn model_name(&self) -> Option<String> {
        Some(self.provider.model().to_string())
    }

    fn notes(&self) -> Vec<String> {
        if self.divergences.is_empty() && self.calls > 0 {
            return vec![format!(
                "replay: all {} requests matched the recording",
                self.calls
            )];
        }
        self.divergences
            .iter()
            .map(|d| format!("replay: {d}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_the_first_difference() {
        let a = json!({"model": "m", "messages": [{"content": [{"text": "a"}]}, {"x": 1}]});
        let same = a.clone();
        assert_eq!(first_difference(&a, &same, ""), None);
        let b = json!({"model": "m", "messages": [{"content": [{"text": "b"}]}, {"x": 1}]});
        assert_eq!(
            first_difference(&a, &b, ""),
            Some("messages[0].content[0].text".into())
        );
        let c = json!({"model": "m", "messages": [{"content": [{"text": "a"}]}]});
        assert_eq!(
            first_difference(&a, &c, ""),
            Some("messages (length 2 recorded, 1 now)".into())
        );
        let d = json!({"model": "m", "messages": [{"content": [{"text": "a"}]}, {"x": 1}], "extra": true});
        assert_eq!(first_difference(&a, &d, ""), Some("extra".into()));
    }
}
