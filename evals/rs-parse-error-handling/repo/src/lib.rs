//! `key=value` lines, one setting a line; `#` starts a comment.

use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub reason: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

pub fn parse(text: &str) -> Result<BTreeMap<String, String>, ParseError> {
    let mut settings = BTreeMap::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (key, value) = line.split_once('=').unwrap();
        let key = key.trim();
        if key.is_empty() {
            return Err(ParseError {
                line: index + 1,
                reason: "empty key".into(),
            });
        }
        settings.insert(key.to_string(), value.trim().to_string());
    }
    Ok(settings)
}
