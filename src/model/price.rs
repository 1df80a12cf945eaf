//! Token usage and what it costs.

use serde::{Deserialize, Deserializer, Serialize};

/// Tokens of one reply, or summed over a run. Input tokens exclude cache writes and reads,
/// as the Anthropic API counts them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default, deserialize_with = "count")]
    pub input_tokens: u64,
    #[serde(default, deserialize_with = "count")]
    pub output_tokens: u64,
    #[serde(default, deserialize_with = "count")]
    pub cache_creation_input_tokens: u64,
    #[serde(default, deserialize_with = "count")]
    pub cache_read_input_tokens: u64,
}

/// The API documents the cache counts as nullable (`integer | null`): null counts none, and
/// does not make the whole reply unreadable.
fn count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    Ok(Option::<u64>::deserialize(deserializer)?.unwrap_or(0))
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
    }

    /// Every input token, whether it came from the cache or not.
    pub fn all_input(&self) -> u64 {
        self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens
    }

    /// The share of input tokens read from the cache, in percent.
    pub fn cache_read_percent(&self) -> Option<u64> {
        let all = self.all_input();
        (all > 0).then(|| self.cache_read_input_tokens * 100 / all)
    }

    /// The share of input tokens read from the cache, from 0 to 1; None before any input.
    pub fn cache_read_share(&self) -> Option<f64> {
        let all = self.all_input();
        (all > 0).then(|| self.cache_read_input_tokens as f64 / all as f64)
    }
}

/// US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    pub cache_write: f64,
    pub cache_read: f64,
}

const fn price(input: f64, output: f64, cache_write: f64, cache_read: f64) -> Price {
    Price {
        input,
        output,
        cache_write,
        cache_read,
    }
}

/// Published list prices by model-name prefix; the longest matching prefix wins.
const PRICES: &[(&str, Price)] = &[
    ("claude-opus-4-6", price(5.0, 25.0, 6.25, 0.50)),
    ("claude-opus-4-5", price(5.0, 25.0, 6.25, 0.50)),
    ("claude-opus-4", price(15.0, 75.0, 18.75, 1.50)),
    ("claude-sonnet-4", price(3.0, 15.0, 3.75, 0.30)),
    ("claude-3-7-sonnet", price(3.0, 15.0, 3.75, 0.30)),
    ("claude-haiku-4", price(1.0, 5.0, 1.25, 0.10)),
    ("claude-3-5-haiku", price(0.80, 4.0, 1.0, 0.08)),
    ("gpt-4o-mini", price(0.15, 0.60, 0.15, 0.075)),
    ("gpt-4o", price(2.50, 10.0, 2.50, 1.25)),
    ("gpt-4.1-nano", price(0.10, 0.40, 0.10, 0.025)),
    ("gpt-4.1-mini", price(0.40, 1.60, 0.40, 0.10)),
    ("gpt-4.1", price(2.0, 8.0, 2.0, 0.50)),
    ("gpt-5-mini", price(0.25, 2.0, 0.25, 0.025)),
    ("gpt-5", price(1.25, 10.0, 1.25, 0.125)),
];

impl Price {
    pub const FREE: Price = price(0.0, 0.0, 0.0, 0.0);

    /// The built-in price of a model, if it is one we know.
    pub fn for_model(model: &str) -> Option<Price> {
        PRICES
            .iter()
            .filter(|(prefix, _)| model.starts_with(prefix))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, p)| *p)
    }

    /// `INPUT OUTPUT [CACHE_WRITE CACHE_READ]`, dollars per million tokens (git config
    /// `agent-git.price`). Cache prices default to the input price and a tenth of it.
    pub fn parse(text: &str) -> Result<Price, String> {
        let numbers: Result<Vec<f64>, _> = text.split_whitespace().map(str::parse::<f64>).collect();
        let bad = || {
            format!(
                "price `{text}` should be `INPUT OUTPUT [CACHE_WRITE CACHE_READ]` in dollars per \
                 million tokens, e.g. `3 15 3.75 0.3`"
            )
        };
        let numbers = numbers.map_err(|_| bad())?;
        if numbers.iter().any(|n| !n.is_finite() || *n < 0.0) {
            return Err(bad());
        }
        match numbers[..] {
            [input, output] => Ok(price(input, output, input, input / 10.0)),
            [input, output, write, read] => Ok(price(input, output, write, read)),
            _ => Err(bad()),
        }
    }

    pub fn cost(&self, usage: &Usage) -> f64 {
        let per_token =
            |tokens: u64, dollars_per_million: f64| tokens as f64 * dollars_per_million / 1e6;
        per_token(usage.input_tokens, self.input)
            + per_token(usage.output_tokens, self.output)
            + per_token(usage.cache_creation_input_tokens, self.cache_write)
            + per_token(usage.cache_read_input_tokens, self.cache_read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins_and_cost_adds_up() {
        assert_eq!(
            Price::for_model("gpt-4o-mini-2024-07-18"),
            Some(price(0.15, 0.60, 0.15, 0.075))
        );
        assert_eq!(
            Price::for_model("claude-opus-4-1-20250805"),
            Some(price(15.0, 75.0, 18.75, 1.50))
        );
        assert_eq!(Price::for_model("llama3.1"), None);
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_creation_input_tokens: 200_000,
            cache_read_input_tokens: 2_000_000,
        };
        let cost = Price::for_model("claude-sonnet-4-5").unwrap().cost(&usage);
        assert!((cost - (3.0 + 1.5 + 0.75 + 0.6)).abs() < 1e-9, "{cost}");
        assert_eq!(usage.cache_read_percent(), Some(62));
    }

    #[test]
    fn the_cache_share_is_of_all_input_and_null_counts_none() {
        let usage: Usage = serde_json::from_str(
            r#"{"input_tokens": 100, "cache_creation_input_tokens": null,
                "cache_read_input_tokens": 300, "output_tokens": 7}"#,
        )
        .unwrap();
        assert_eq!(usage.cache_creation_input_tokens, 0);
        assert_eq!(usage.cache_read_share(), Some(0.75));
        assert_eq!(Usage::default().cache_read_share(), None);
        let only_writes = Usage {
            cache_creation_input_tokens: 10,
            ..Usage::default()
        };
        assert_eq!(only_writes.cache_read_share(), Some(0.0));
    }

    #[test]
    fn prices_parse_from_config() {
        assert_eq!(Price::parse("3 15"), Ok(price(3.0, 15.0, 3.0, 0.3)));
        assert_eq!(Price::parse(" 1 2 3 4 "), Ok(price(1.0, 2.0, 3.0, 4.0)));
        assert!(Price::parse("cheap").is_err());
        assert!(Price::parse("1 2 3").is_err());
        assert!(Price::parse("-1 2").is_err());
    }
}
