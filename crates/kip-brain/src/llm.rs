//! An OpenAI-compatible chat-completions client with tool calling.
//!
//! `URL#MODEL`: `URL` is the API base (`http://localhost:11434/v1`, `https://api.openai.com/v1`)
//! or the full `.../chat/completions` URL; the key, if any, comes from `KIP_LLM_API_KEY`
//! (sent as a bearer token). Requests time out after [`TIMEOUT`]; transport errors, 408,
//! 429 and 5xx are retried [`RETRIES`] times with backoff (1, 2, 4 s); other statuses
//! fail at once with the endpoint's own message.

use kip_openai::{Client, Policy};
use serde_json::{json, Value};
use std::time::Duration;

/// Time budget of one chat request (local models can be slow).
pub const TIMEOUT: Duration = Duration::from_secs(300);
/// Retries of a failed request.
pub const RETRIES: u32 = 3;

/// A failure of the language model endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmError(pub String);

impl std::fmt::Display for LlmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LlmError {}

/// Where the model is: `URL#MODEL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmSpec {
    /// The chat-completions URL.
    pub url: String,
    /// The model name sent in each request.
    pub model: String,
}

impl LlmSpec {
    /// Parses `URL#MODEL`.
    pub fn parse(spec: &str) -> Result<LlmSpec, LlmError> {
        let (url, model) = spec.rsplit_once('#').ok_or_else(|| {
            LlmError(format!(
                "the language model spec {spec:?} has no #MODEL: write URL#MODEL, e.g. http://localhost:11434/v1#llama3.1"
            ))
        })?;
        if !(url.starts_with("http://") || url.starts_with("https://")) || model.trim().is_empty() {
            return Err(LlmError(format!(
                "the language model spec {spec:?} is not URL#MODEL with an http(s) URL"
            )));
        }
        Ok(LlmSpec {
            url: kip_openai::endpoint_url(url, "chat/completions"),
            model: model.trim().to_string(),
        })
    }
}

/// One tool call the model asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The call's id (echoed in the tool message that answers it).
    pub id: String,
    /// The function name.
    pub name: String,
    /// The arguments text (JSON, if the model behaved).
    pub arguments: String,
}

/// The model's answer: text and/or tool calls, and the raw message to put back into the
/// conversation.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Its text, if any.
    pub content: Option<String>,
    /// The tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// The assistant message as the endpoint sent it (to append to `messages`).
    pub message: Value,
}

/// A chat-completions client.
#[derive(Debug)]
pub struct ChatClient {
    client: Client,
    spec: LlmSpec,
}

impl ChatClient {
    /// A client for `spec` with an optional bearer key. Sends nothing yet.
    pub fn new(spec: LlmSpec, key: Option<String>) -> ChatClient {
        let policy = Policy {
            timeout: TIMEOUT,
            retries: RETRIES,
            first_wait: Duration::from_secs(1),
            max_answer_bytes: 64 * 1024 * 1024,
        };
        ChatClient {
            client: Client::new(spec.url.clone(), key, policy),
            spec,
        }
    }

    /// The endpoint and model.
    pub fn spec(&self) -> &LlmSpec {
        &self.spec
    }

    /// The bearer key, if any.
    pub fn key(&self) -> Option<&str> {
        self.client.key()
    }

    /// Sends the conversation with the tool definitions; the first choice's message.
    pub fn chat(&self, messages: &[Value], tools: &[Value]) -> Result<Reply, LlmError> {
        let mut body = json!({
            "model": self.spec.model,
            "messages": messages,
            "temperature": 0,
        });
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools.to_vec());
            body["tool_choice"] = json!("auto");
        }
        let v = self
            .client
            .post(&body)
            .map_err(|e| LlmError(e.to_string()))?;
        let Some(message) = v.pointer("/choices/0/message").cloned() else {
            return Err(LlmError(format!(
                "{}: the answer has no choices[0].message",
                self.spec.url
            )));
        };
        let content = message
            .get("content")
            .and_then(Value::as_str)
            .map(str::to_string);
        let tool_calls = message
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, c)| {
                let f = c.get("function").cloned().unwrap_or(Value::Null);
                ToolCall {
                    id: c
                        .get("id")
                        .and_then(Value::as_str)
                        .map_or_else(|| format!("call_{i}"), str::to_string),
                    name: f
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    // Some servers send the arguments as an object, not a string.
                    arguments: match f.get("arguments") {
                        Some(Value::String(s)) => s.clone(),
                        Some(Value::Null) | None => String::new(),
                        Some(other) => other.to_string(),
                    },
                }
            })
            .collect();
        Ok(Reply {
            content,
            tool_calls,
            message,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        let s = LlmSpec::parse("http://localhost:11434/v1#llama3.1:8b").expect("spec");
        assert_eq!(s.url, "http://localhost:11434/v1/chat/completions");
        assert_eq!(s.model, "llama3.1:8b");
        let s = LlmSpec::parse("https://x/v1/chat/completions/#m").expect("spec");
        assert_eq!(s.url, "https://x/v1/chat/completions");
        for bad in ["http://x", "ftp://x#m", "http://x#", "llama"] {
            assert!(LlmSpec::parse(bad).is_err(), "{bad}");
        }
    }
}
