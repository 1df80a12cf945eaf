//! When to retry a failed API call, and how long to wait first. Pure: the HTTP code asks.

use std::time::Duration;

/// When a failed API call is tried again, and how long to wait first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The wait before the first retry; each later one doubles it.
    pub base: Duration,
    /// The longest wait the doubling reaches.
    pub cap: Duration,
    /// The longest wait a server's retry-after is honoured for.
    pub max_server_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(8),
            max_server_wait: Duration::from_secs(60),
        }
    }
}

/// What a failed attempt looked like. The default is an attempt that got no answer at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Failure {
    /// None for a connection error or a timeout.
    pub status: Option<u16>,
    /// The server's `x-should-retry` header, when sent: it overrides the status.
    pub should_retry: Option<bool>,
    /// From `retry-after-ms` or `retry-after` (seconds).
    pub retry_after: Option<Duration>,
}

pub fn retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || status >= 500
}

impl RetryPolicy {
    /// The wait before retry number `retries_done + 1`, or None to give up. `jitter` in [0, 1)
    /// shortens the backoff by up to a quarter, so that many clients do not retry in step.
    pub fn delay(&self, retries_done: u32, failure: Failure, jitter: f64) -> Option<Duration> {
        if retries_done >= self.max_retries {
            return None;
        }
        let retryable = match failure.should_retry {
            Some(verdict) => verdict,
            None => failure.status.is_none_or(retryable_status),
        };
        if !retryable {
            return None;
        }
        if let Some(wait) = failure.retry_after {
            return Some(wait.min(self.max_server_wait));
        }
        let backoff = self
            .base
            .saturating_mul(2u32.saturating_pow(retries_done))
            .min(self.cap);
        Some(backoff.mul_f64(1.0 - 0.25 * jitter.clamp(0.0, 1.0)))
    }
}

/// Reads `retry-after-ms` (milliseconds) or else `retry-after` (whole seconds; HTTP dates are
/// not honoured and fall back to the backoff).
pub fn parse_retry_after(ms: Option<&str>, secs: Option<&str>) -> Option<Duration> {
    if let Some(ms) = ms
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| *v >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    secs.and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| *v >= 0.0 && v.is_finite())
        .map(Duration::from_secs_f64)
}

/// A number in [0, 1) that differs from call to call.
pub fn jitter() -> f64 {
    (random_bits() >> 11) as f64 / (1u64 << 53) as f64
}

/// 64 bits that differ from call to call: the time, hashed with std's random keys.
pub fn random_bits() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(status: Option<u16>) -> Failure {
        Failure {
            status,
            should_retry: None,
            retry_after: None,
        }
    }

    #[test]
    fn retries_transient_statuses_with_capped_exponential_backoff() {
        let policy = RetryPolicy {
            max_retries: 10,
            ..RetryPolicy::default()
        };
        let waits: Vec<Option<Duration>> = (0..6)
            .map(|n| policy.delay(n, failure(Some(529)), 0.0))
            .collect();
        let secs = |s: f64| Some(Duration::from_secs_f64(s));
        assert_eq!(
            waits,
            vec![
                secs(0.5),
                secs(1.0),
                secs(2.0),
                secs(4.0),
                secs(8.0),
                secs(8.0)
            ]
        );
        assert_eq!(policy.delay(0, failure(Some(529)), 1.0), secs(0.375));
        for status in [408, 409, 429, 500, 503] {
            assert!(
                policy.delay(0, failure(Some(status)), 0.0).is_some(),
                "{status}"
            );
        }
        assert!(
            policy.delay(0, failure(None), 0.0).is_some(),
            "connection errors retry"
        );
        for status in [400, 401, 403, 404, 413] {
            assert_eq!(
                policy.delay(0, failure(Some(status)), 0.0),
                None,
                "{status}"
            );
        }
    }

    #[test]
    fn server_headers_decide_and_the_budget_ends_retries() {
        let policy = RetryPolicy::default();
        let told = |should_retry, retry_after| Failure {
            status: Some(429),
            should_retry,
            retry_after,
        };
        assert_eq!(policy.delay(0, told(Some(false), None), 0.0), None);
        assert!(policy
            .delay(
                0,
                Failure {
                    status: Some(400),
                    should_retry: Some(true),
                    retry_after: None
                },
                0.0
            )
            .is_some());
        assert_eq!(
            policy.delay(0, told(None, Some(Duration::from_secs(3))), 0.9),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            policy.delay(0, told(None, Some(Duration::from_secs(600))), 0.0),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            policy.delay(4, failure(Some(529)), 0.0),
            None,
            "four retries by default"
        );
    }

    #[test]
    fn retry_after_headers_parse() {
        assert_eq!(
            parse_retry_after(Some("1500"), Some("9")),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after(None, Some("2")),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            parse_retry_after(None, Some("Wed, 21 Oct 2015 07:28:00 GMT")),
            None
        );
        assert_eq!(parse_retry_after(Some("soon"), None), None);
        let j = jitter();
        assert!((0.0..1.0).contains(&j));
    }
}
