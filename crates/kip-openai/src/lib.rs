//! The one OpenAI-compatible HTTP client of kip-nexus, shared by the embedder
//! (`POST .../embeddings`) and the brain (`POST .../chat/completions`).
//!
//! A [`Client`] posts a JSON body to one endpoint URL, with the key as a bearer token
//! when there is one, and reads the JSON answer. A request that cannot connect, is
//! reset, times out, or is answered 408, 429 or 5xx is retried (at most
//! [`Policy::retries`] times, waiting [`Policy::first_wait`] and twice as long each
//! time); any other status fails at once with the endpoint's own message
//! (`error.message` of the OpenAI error shape, or the start of the body).

use serde_json::Value;
use std::time::Duration;

/// A failure of a request to an OpenAI-compatible endpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The request did not get an answer: refused, reset, timed out, or the body
    /// could not be read.
    #[error("{url}: {message}")]
    Transport {
        /// The endpoint.
        url: String,
        /// What the transport reported.
        message: String,
    },
    /// The endpoint answered with a status other than 200.
    #[error("{url}: HTTP {status}: {message}")]
    Status {
        /// The endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The endpoint's own message.
        message: String,
    },
    /// The endpoint answered 200 with a body that is not JSON.
    #[error("{url}: the answer is not JSON: {message}")]
    NotJson {
        /// The endpoint.
        url: String,
        /// The parser's message.
        message: String,
    },
}

impl HttpError {
    /// Whether another try may succeed: transport failures, 408, 429 and 5xx.
    pub fn is_retryable(&self) -> bool {
        match self {
            HttpError::Transport { .. } => true,
            HttpError::Status { status, .. } => *status == 408 || *status == 429 || *status >= 500,
            HttpError::NotJson { .. } => false,
        }
    }
}

/// How a client waits and retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Time allowed for one request, connection included.
    pub timeout: Duration,
    /// Retries of a retryable failure (so at most `retries + 1` attempts).
    pub retries: u32,
    /// The wait before the first retry; each later wait doubles.
    pub first_wait: Duration,
    /// The largest answer read, in bytes.
    pub max_answer_bytes: u64,
}

/// The URL of `path` (`embeddings`, `chat/completions`) under an API base such as
/// `http://localhost:11434/v1`, or `base` itself when it already ends in `/path`.
pub fn endpoint_url(base: &str, path: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with(&format!("/{path}")) {
        base.to_string()
    } else {
        format!("{base}/{path}")
    }
}

/// A client of one endpoint URL.
#[derive(Debug)]
pub struct Client {
    agent: ureq::Agent,
    url: String,
    key: Option<String>,
    policy: Policy,
}

impl Client {
    /// A client posting to `url` with an optional bearer key (an empty key is none).
    /// Sends nothing yet.
    pub fn new(url: impl Into<String>, key: Option<String>, policy: Policy) -> Client {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(policy.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        Client {
            agent,
            url: url.into(),
            key: key.filter(|k| !k.is_empty()),
            policy,
        }
    }

    /// The endpoint URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bearer key, if any.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// Posts `body` and returns the JSON answer, retrying what is worth retrying.
    pub fn post(&self, body: &Value) -> Result<Value, HttpError> {
        let mut wait = self.policy.first_wait;
        let mut tries = 0;
        loop {
            match self.attempt(body) {
                Ok(v) => return Ok(v),
                Err(e) if e.is_retryable() && tries < self.policy.retries => {
                    tracing::warn!(url = %self.url, error = %e, "request failed; retrying");
                    std::thread::sleep(wait);
                    wait = wait.saturating_mul(2);
                    tries += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn attempt(&self, body: &Value) -> Result<Value, HttpError> {
        let transport = |e: &dyn std::fmt::Display| HttpError::Transport {
            url: self.url.clone(),
            message: e.to_string(),
        };
        let mut req = self.agent.post(&self.url);
        if let Some(k) = &self.key {
            req = req.header("Authorization", format!("Bearer {k}"));
        }
        let mut resp = req.send_json(body).map_err(|e| transport(&e))?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(self.policy.max_answer_bytes)
            .read_to_string()
            .map_err(|e| transport(&e))?;
        if status != 200 {
            return Err(HttpError::Status {
                url: self.url.clone(),
                status,
                message: error_message(&text),
            });
        }
        serde_json::from_str(&text).map_err(|e| HttpError::NotJson {
            url: self.url.clone(),
            message: e.to_string(),
        })
    }
}

/// The endpoint's own message in an error answer: `error.message`, or `error` itself,
/// else the first 300 characters of the body.
fn error_message(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("error"))
                .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_string))
        })
        .unwrap_or_else(|| text.chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_named_by_its_base_or_in_full() {
        assert_eq!(
            endpoint_url("http://h:1/v1/", "embeddings"),
            "http://h:1/v1/embeddings"
        );
        assert_eq!(
            endpoint_url("http://h:1/v1/chat/completions", "chat/completions"),
            "http://h:1/v1/chat/completions"
        );
    }

    #[test]
    fn the_endpoints_own_message_is_kept() {
        assert_eq!(
            error_message(r#"{"error": {"message": "model not found"}}"#),
            "model not found"
        );
        assert_eq!(error_message(r#"{"error": "overloaded"}"#), "overloaded");
        assert_eq!(error_message("Bad Gateway"), "Bad Gateway");
    }

    #[test]
    fn only_transient_failures_are_retried() {
        let status = |status| HttpError::Status {
            url: String::new(),
            status,
            message: String::new(),
        };
        assert!(status(429).is_retryable());
        assert!(status(503).is_retryable());
        assert!(status(408).is_retryable());
        assert!(!status(400).is_retryable());
        assert!(!status(401).is_retryable());
        assert!(HttpError::Transport {
            url: String::new(),
            message: String::new()
        }
        .is_retryable());
    }
}
