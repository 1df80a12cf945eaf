//! A model whose replies are read from a JSON file and returned in order, whatever is sent.

use super::{Model, ModelError, Reply, Request, StopReason};
use std::collections::VecDeque;
use std::path::Path;

/// A model that returns the replies of a script in order, whatever it is sent; `ScriptExhausted`
/// once they run out.
pub struct ScriptedModel {
    label: String,
    total: usize,
    replies: VecDeque<Reply>,
}

impl ScriptedModel {
    /// A script of `replies`, named `label` in the report.
    pub fn new(label: impl Into<String>, replies: Vec<Reply>) -> Self {
        ScriptedModel {
            label: label.into(),
            total: replies.len(),
            replies: replies.into(),
        }
    }

    /// Reads and validates the whole script up front, so a bad file fails before any branch exists.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the script {}: {e}", path.display()))?;
        let replies: Vec<Reply> = serde_json::from_str(&text).map_err(|e| {
            format!(
                "the script {} is not a JSON array of replies \
                 ({{\"stop_reason\": ..., \"content\": [...]}}): {e}",
                path.display()
            )
        })?;
        // Real APIs may add stop reasons; a script is ours, and a typo in it is an error.
        if let Some(i) = replies
            .iter()
            .position(|r| r.stop_reason == StopReason::Unknown)
        {
            return Err(format!(
                "the script {} has an unknown stop_reason in reply {}; use tool_use, end_turn, \
                 max_tokens, stop_sequence, pause_turn or refusal",
                path.display(),
                i + 1
            ));
        }
        Ok(Self::new(format!("script:{}", path.display()), replies))
    }
}

#[async_trait::async_trait]
impl Model for ScriptedModel {
    fn label(&self) -> String {
        self.label.clone()
    }

    async fn reply(&mut self, _request: &Request<'_>) -> Result<Reply, ModelError> {
        self.replies
            .pop_front()
            .ok_or(ModelError::ScriptExhausted(self.total))
    }
}
