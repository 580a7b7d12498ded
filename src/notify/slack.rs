//! Delivery to a Slack incoming webhook: an HTTP POST of a JSON payload with a timeout, retried
//! with exponential backoff on 429 and 5xx (honouring `Retry-After`) and on connection errors,
//! for a bounded number of attempts.
//!
//! The webhook URL is a secret (it is the credential): [`Webhook`] never prints it, and errors
//! are stripped of it before they reach a message.

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::runtime;

/// The environment variable read when no URL is passed.
pub const WEBHOOK_ENV: &str = "SLACK_WEBHOOK_URL";

/// A webhook URL, validated, that never shows itself.
#[derive(Clone)]
pub struct Webhook(reqwest::Url);

impl fmt::Debug for Webhook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Webhook(<redacted>)")
    }
}

impl Webhook {
    /// Parses `url` (http or https). The message of a refusal does not repeat the URL.
    pub fn parse(url: &str) -> Result<Self> {
        let parsed = reqwest::Url::parse(url.trim()).map_err(|_| {
            Error::invalid("slack_webhook_url is not a valid URL (its value is not shown: it is a secret)")
        })?;
        let loopback = matches!(parsed.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
        let scheme_ok = parsed.scheme() == "https" || (parsed.scheme() == "http" && loopback);
        if !scheme_ok || parsed.host_str().is_none() {
            return Err(Error::invalid(
                "slack_webhook_url must be an https URL (http only to this machine; its value is not shown: it is a secret)",
            ));
        }
        Ok(Self(parsed))
    }

    /// The parameter when given (and not empty), else `$SLACK_WEBHOOK_URL`, else none.
    pub fn resolve(parameter: Option<&str>) -> Result<Option<Self>> {
        let given = |v: Option<&str>| v.map(str::trim).filter(|u| !u.is_empty()).map(str::to_string);
        match given(parameter).or_else(|| given(std::env::var(WEBHOOK_ENV).ok().as_deref())) {
            Some(url) => Self::parse(&url).map(Some),
            None => Ok(None),
        }
    }
}

/// How hard to try.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all (at least 1).
    pub max_attempts: u32,
    /// Per-request timeout.
    pub timeout: Duration,
    /// First backoff; doubled after each failed attempt.
    pub base_backoff: Duration,
    /// No single wait (backoff or `Retry-After`) is longer than this.
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            timeout: Duration::from_secs(10),
            base_backoff: Duration::from_millis(500),
            max_wait: Duration::from_secs(30),
        }
    }
}

/// What a delivery achieved.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// Whether Slack accepted the message (2xx).
    pub ok: bool,
    /// The last HTTP status, if any response came.
    pub status: Option<u16>,
    /// Attempts made.
    pub attempts: u32,
    /// Why it failed (never contains the URL).
    pub error: Option<String>,
}

impl Delivery {
    /// The outcome as JSON.
    pub fn to_json(&self) -> Value {
        json!({"ok": self.ok, "status": self.status, "attempts": self.attempts, "error": self.error})
    }

    /// `sent` or `failed after N attempts: …`.
    pub fn describe(&self) -> String {
        if self.ok {
            "sent".to_string()
        } else {
            format!(
                "failed after {} attempt{}: {}",
                self.attempts,
                if self.attempts == 1 { "" } else { "s" },
                self.error.as_deref().unwrap_or("unknown error")
            )
        }
    }
}

/// The wait before attempt `attempt + 1` (1-based `attempt` just failed).
pub fn backoff(policy: &RetryPolicy, attempt: u32, retry_after: Option<Duration>) -> Duration {
    let exponential = policy.base_backoff.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
    retry_after.unwrap_or(exponential).min(policy.max_wait)
}

/// `Retry-After` as seconds (the HTTP-date form is not used by Slack and is ignored).
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let value = response.headers().get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse::<f64>().ok().and_then(|s| Duration::try_from_secs_f64(s).ok())
}

/// Whether a status is worth retrying.
pub fn retryable(status: u16) -> bool {
    status == 429 || (500..600).contains(&status)
}

/// How often a wait between attempts looks for Ctrl-C.
const INTERRUPT_POLL: Duration = Duration::from_millis(50);

/// POSTs `payload` to `webhook`, retrying per `policy`. Never fails: the outcome says.
pub fn post(webhook: &Webhook, payload: &Value, policy: &RetryPolicy) -> Delivery {
    let attempt_all = async {
        let client = match reqwest::Client::builder().timeout(policy.timeout).build() {
            Ok(c) => c,
            Err(e) => {
                return Delivery {
                    ok: false,
                    status: None,
                    attempts: 0,
                    error: Some(format!("cannot build the HTTP client: {}", e.without_url())),
                };
            }
        };
        let mut delivery = Delivery { ok: false, status: None, attempts: 0, error: None };
        for attempt in 1..=policy.max_attempts.max(1) {
            delivery.attempts = attempt;
            let wait = match client.post(webhook.0.clone()).json(payload).send().await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    delivery.status = Some(status);
                    if response.status().is_success() {
                        delivery.ok = true;
                        delivery.error = None;
                        return delivery;
                    }
                    let after = retry_after(&response);
                    let body: String = response.text().await.unwrap_or_default().chars().take(200).collect();
                    delivery.error = Some(format!(
                        "HTTP {status}{}",
                        if body.is_empty() { String::new() } else { format!(": {body}") }
                    ));
                    if !retryable(status) {
                        return delivery;
                    }
                    backoff(policy, attempt, after)
                }
                Err(e) => {
                    delivery.status = None;
                    let kind = if e.is_timeout() {
                        "timed out"
                    } else if e.is_connect() {
                        "cannot connect"
                    } else {
                        "request failed"
                    };
                    delivery.error = Some(format!("{kind}: {}", e.without_url()));
                    backoff(policy, attempt, None)
                }
            };
            if attempt < policy.max_attempts {
                // The wait between attempts ends early, and no attempt follows, on Ctrl-C.
                let until = tokio::time::Instant::now() + wait;
                while tokio::time::Instant::now() < until && !crate::interrupt::interrupted() {
                    tokio::time::sleep_until(until.min(tokio::time::Instant::now() + INTERRUPT_POLL)).await;
                }
                if crate::interrupt::interrupted() {
                    let last = delivery.error.take().unwrap_or_default();
                    delivery.error = Some(format!("{last}; interrupted before attempt {}", attempt + 1));
                    return delivery;
                }
            }
        }
        delivery
    };
    runtime::block_on(attempt_all).unwrap_or_else(|e| Delivery {
        ok: false,
        status: None,
        attempts: 0,
        error: Some(e.to_string()),
    })
}

/// A message as a payload: a JSON object (Block Kit, with `text` and/or `blocks`) is sent as
/// it is; anything else is sent as `{"text": message}`.
pub fn payload_of(message: &str) -> Value {
    match serde_json::from_str::<Value>(message) {
        Ok(Value::Object(map)) if map.contains_key("text") || map.contains_key("blocks") => Value::Object(map),
        _ => json!({ "text": message }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_validated_and_never_shown() {
        let secret = "https://hooks.slack.com/services/T000/B000/XXXXSECRET";
        let hook = Webhook::parse(secret).unwrap();
        assert!(!format!("{hook:?}").contains("SECRET"));
        assert!(Webhook::parse("http://127.0.0.1:9/SECRET").is_ok(), "plain http to this machine (tests)");
        for bad in ["not a url SECRET", "ftp://x/SECRET", "file:///SECRET", "http://hooks.slack.com/SECRET"] {
            let err = Webhook::parse(bad).unwrap_err().to_string();
            assert!(!err.contains("SECRET"), "{err}");
        }
    }

    #[test]
    fn backoff_doubles_and_honours_retry_after_within_the_cap() {
        let p = RetryPolicy::default();
        assert_eq!(backoff(&p, 1, None), Duration::from_millis(500));
        assert_eq!(backoff(&p, 3, None), Duration::from_secs(2));
        assert_eq!(backoff(&p, 2, Some(Duration::from_secs(7))), Duration::from_secs(7));
        assert_eq!(backoff(&p, 2, Some(Duration::from_secs(3600))), Duration::from_secs(30));
        assert!(retryable(429) && retryable(503) && !retryable(400) && !retryable(404));
    }

    #[test]
    fn messages_become_payloads() {
        assert_eq!(payload_of("hello"), json!({"text": "hello"}));
        assert_eq!(payload_of(r#"{"blocks": []}"#), json!({"blocks": []}));
        assert_eq!(payload_of(r#"{"other": 1}"#), json!({"text": r#"{"other": 1}"#}));
        assert_eq!(payload_of("[1]"), json!({"text": "[1]"}));
    }
}
