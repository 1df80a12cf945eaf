//! Token usage and what it costs.

use serde::{Deserialize, Deserializer, Serialize};

/// Tokens of one reply, or summed over a run. Input tokens exclude cache writes and reads,
/// as the Anthropic API counts them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens neither written to nor read from the cache.
    #[serde(default, deserialize_with = "count")]
    pub input_tokens: u64,
    /// Output tokens, thinking and reasoning included.
    #[serde(default, deserialize_with = "count")]
    pub output_tokens: u64,
    /// Input tokens written to the prompt cache.
    #[serde(default, deserialize_with = "count")]
    pub cache_creation_input_tokens: u64,
    /// Input tokens read from the prompt cache.
    #[serde(default, deserialize_with = "count")]
    pub cache_read_input_tokens: u64,
    /// Of the output, the tokens a reasoning model spent reasoning, where the API says
    /// (OpenAI's `reasoning_tokens`; Anthropic counts thinking in the output alone).
    #[serde(default, deserialize_with = "count")]
    pub reasoning_tokens: u64,
}

/// The API documents the cache counts as nullable (`integer | null`): null counts none, and
/// does not make the whole reply unreadable.
fn count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    Ok(Option::<u64>::deserialize(deserializer)?.unwrap_or(0))
}

impl Usage {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
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
    /// Per million input tokens not from the cache.
    pub input: f64,
    /// Per million output tokens.
    pub output: f64,
    /// Per million input tokens written to the cache.
    pub cache_write: f64,
    /// Per million input tokens read from the cache.
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

/// One model's list prices, and the month they were read from the provider's price page.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ListedPrice {
    /// The names the provider serves the model under: its alias and its dated snapshots.
    pub names: &'static [&'static str],
    /// The standard-tier price.
    pub price: Price,
    /// When the price was read, as `YYYY-MM`: prices change, and this says how old one is.
    pub source: &'static str,
}

const fn listed(names: &'static [&'static str], price: Price, source: &'static str) -> ListedPrice {
    ListedPrice {
        names,
        price,
        source,
    }
}

/// Standard-tier list prices by exact model name. Snapshots are named one by one, never
/// matched by prefix: tiers that share a prefix are priced apart (gpt-5-nano is 25× cheaper
/// than gpt-5), and so are snapshots (gpt-4o-2024-05-13 is $5/$15, gpt-4o $2.50/$10).
/// OpenAI bills no cache writes, so theirs are the input price. Read from
/// platform.claude.com/docs/en/about-claude/pricing and developers.openai.com/api/docs/models;
/// those dated 2026-11 are as the table was first written, not yet read again.
const PRICES: &[ListedPrice] = &[
    listed(
        &["claude-opus-4-7"],
        price(5.0, 25.0, 6.25, 0.50),
        "2026-12",
    ),
    listed(
        &["claude-opus-4-6"],
        price(5.0, 25.0, 6.25, 0.50),
        "2026-12",
    ),
    listed(
        &["claude-opus-4-5", "claude-opus-4-5-20251101"],
        price(5.0, 25.0, 6.25, 0.50),
        "2026-12",
    ),
    listed(
        &["claude-opus-4-1", "claude-opus-4-1-20250805"],
        price(15.0, 75.0, 18.75, 1.50),
        "2026-12",
    ),
    listed(
        &["claude-opus-4-0", "claude-opus-4-20250514"],
        price(15.0, 75.0, 18.75, 1.50),
        "2026-12",
    ),
    listed(
        &["claude-sonnet-4-6"],
        price(3.0, 15.0, 3.75, 0.30),
        "2026-12",
    ),
    listed(
        &["claude-sonnet-4-5", "claude-sonnet-4-5-20250929"],
        price(3.0, 15.0, 3.75, 0.30),
        "2026-12",
    ),
    listed(
        &["claude-sonnet-4-0", "claude-sonnet-4-20250514"],
        price(3.0, 15.0, 3.75, 0.30),
        "2026-12",
    ),
    listed(
        &["claude-3-7-sonnet-latest", "claude-3-7-sonnet-20250219"],
        price(3.0, 15.0, 3.75, 0.30),
        "2026-12",
    ),
    listed(
        &["claude-haiku-4-5", "claude-haiku-4-5-20251001"],
        price(1.0, 5.0, 1.25, 0.10),
        "2026-12",
    ),
    listed(
        &["claude-3-5-haiku-latest", "claude-3-5-haiku-20241022"],
        price(0.80, 4.0, 1.0, 0.08),
        "2026-12",
    ),
    listed(
        &["gpt-5", "gpt-5-2025-08-07"],
        price(1.25, 10.0, 1.25, 0.125),
        "2026-11",
    ),
    listed(
        &["gpt-5-mini", "gpt-5-mini-2025-08-07"],
        price(0.25, 2.0, 0.25, 0.025),
        "2026-12",
    ),
    listed(
        &["gpt-5-nano", "gpt-5-nano-2025-08-07"],
        price(0.05, 0.40, 0.05, 0.005),
        "2026-12",
    ),
    listed(
        &["gpt-4.1", "gpt-4.1-2025-04-14"],
        price(2.0, 8.0, 2.0, 0.50),
        "2026-11",
    ),
    listed(
        &["gpt-4.1-mini", "gpt-4.1-mini-2025-04-14"],
        price(0.40, 1.60, 0.40, 0.10),
        "2026-11",
    ),
    listed(
        &["gpt-4.1-nano", "gpt-4.1-nano-2025-04-14"],
        price(0.10, 0.40, 0.10, 0.025),
        "2026-12",
    ),
    listed(
        &["gpt-4o", "gpt-4o-2024-08-06", "gpt-4o-2024-11-20"],
        price(2.50, 10.0, 2.50, 1.25),
        "2026-11",
    ),
    listed(
        &["gpt-4o-mini", "gpt-4o-mini-2024-07-18"],
        price(0.15, 0.60, 0.15, 0.075),
        "2026-11",
    ),
];

impl Price {
    /// Nothing per token: what a script costs.
    pub const FREE: Price = price(0.0, 0.0, 0.0, 0.0);

    /// The built-in price of a model, if the table names it; None is "price unknown".
    pub fn for_model(model: &str) -> Option<Price> {
        ListedPrice::of(model).map(|listed| listed.price)
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

    /// What `usage` costs at this price, in US dollars.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let per_token =
            |tokens: u64, dollars_per_million: f64| tokens as f64 * dollars_per_million / 1e6;
        per_token(usage.input_tokens, self.input)
            + per_token(usage.output_tokens, self.output)
            + per_token(usage.cache_creation_input_tokens, self.cache_write)
            + per_token(usage.cache_read_input_tokens, self.cache_read)
    }
}

impl ListedPrice {
    /// The table's entry naming `model` exactly, if there is one.
    pub fn of(model: &str) -> Option<&'static ListedPrice> {
        PRICES.iter().find(|listed| listed.names.contains(&model))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each name looked up, with the price the table gives it.
    fn prices_of(names: &[&'static str]) -> Vec<(&'static str, Option<Price>)> {
        names.iter().map(|n| (*n, Price::for_model(n))).collect()
    }

    #[test]
    fn a_listed_name_gets_its_own_entry_whole() {
        assert_eq!(
            ListedPrice::of("gpt-5-nano"),
            Some(&ListedPrice {
                names: &["gpt-5-nano", "gpt-5-nano-2025-08-07"],
                price: price(0.05, 0.40, 0.05, 0.005),
                source: "2026-12",
            })
        );
        assert_eq!(
            prices_of(&[
                "gpt-5",
                "gpt-5-nano",
                "gpt-4o-mini",
                "claude-3-5-haiku-latest",
                "claude-opus-4-6"
            ]),
            vec![
                ("gpt-5", Some(price(1.25, 10.0, 1.25, 0.125))),
                ("gpt-5-nano", Some(price(0.05, 0.40, 0.05, 0.005))),
                ("gpt-4o-mini", Some(price(0.15, 0.60, 0.15, 0.075))),
                ("claude-3-5-haiku-latest", Some(price(0.80, 4.0, 1.0, 0.08))),
                ("claude-opus-4-6", Some(price(5.0, 25.0, 6.25, 0.50))),
            ]
        );
    }

    #[test]
    fn a_dated_snapshot_of_a_listed_model_is_priced_as_it() {
        assert_eq!(
            prices_of(&[
                "claude-sonnet-4-5-20250929",
                "claude-opus-4-1-20250805",
                "claude-3-5-haiku-20241022",
                "gpt-5-nano-2025-08-07",
                "gpt-4o-mini-2024-07-18",
            ]),
            vec![
                (
                    "claude-sonnet-4-5-20250929",
                    Some(price(3.0, 15.0, 3.75, 0.30))
                ),
                (
                    "claude-opus-4-1-20250805",
                    Some(price(15.0, 75.0, 18.75, 1.50))
                ),
                (
                    "claude-3-5-haiku-20241022",
                    Some(price(0.80, 4.0, 1.0, 0.08))
                ),
                (
                    "gpt-5-nano-2025-08-07",
                    Some(price(0.05, 0.40, 0.05, 0.005))
                ),
                (
                    "gpt-4o-mini-2024-07-18",
                    Some(price(0.15, 0.60, 0.15, 0.075))
                ),
            ]
        );
    }

    #[test]
    fn a_name_that_only_shares_a_prefix_with_a_listed_one_has_no_price() {
        let unlisted = [
            "gpt-5-pro",
            "gpt-5.1",
            "gpt-5-nano-2026-01-01",
            "gpt-4o-2024-05-13",
            "gpt-4o-audio-preview",
            "gpt-4o-mini-realtime-preview",
            "o4",
            "o4-mini",
            "claude-opus-4",
            "claude-opus-4-8",
            "claude-3-5-haiku",
            "claude-3-5-sonnet-20241022",
            "claude-sonnet-4-5-20991231",
            "llama3.1",
        ];
        assert_eq!(
            prices_of(&unlisted),
            unlisted.iter().map(|n| (*n, None)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn every_name_is_listed_once_and_every_price_has_its_month() {
        let names: Vec<&str> = PRICES
            .iter()
            .flat_map(|l| l.names.iter().copied())
            .collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        let month = regex::Regex::new(r"^20[0-9]{2}-(0[1-9]|1[0-2])$").unwrap();
        let undated: Vec<&ListedPrice> = PRICES
            .iter()
            .filter(|l| !month.is_match(l.source))
            .collect();
        assert_eq!(undated, Vec::<&ListedPrice>::new());
    }

    #[test]
    fn cost_adds_up_every_kind_of_token() {
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_creation_input_tokens: 200_000,
            cache_read_input_tokens: 2_000_000,
            reasoning_tokens: 0,
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
