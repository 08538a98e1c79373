//! `openai:URL#MODEL`: an OpenAI-compatible embeddings endpoint.
//!
//! `POST {URL}/embeddings` (or URL itself when it already ends in `/embeddings`) with
//! `{"model": MODEL, "input": [texts]}`, at most [`BATCH`] texts per request, the key of
//! `KIP_EMBEDDER_API_KEY` as a bearer token. A request that times out, cannot connect,
//! or gets 408/429/5xx is retried [`RETRIES`] times with doubling waits (0.5 s, 1 s,
//! 2 s); other answers fail at once with the endpoint's own message. Vectors are scaled
//! to unit length (not every server does).

use crate::{normalize, EmbedError, Embedder};
use serde_json::{json, Value};
use std::time::Duration;

/// Texts per request.
pub const BATCH: usize = 64;
/// Retries of a failed request (so at most `RETRIES + 1` attempts).
pub const RETRIES: u32 = 3;
/// Time allowed for one request, connection included.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// A client of one OpenAI-compatible embeddings endpoint and model.
#[derive(Debug)]
pub struct OpenAiEmbedder {
    agent: ureq::Agent,
    url: String,
    model: String,
    key: Option<String>,
    id: String,
    dim: usize,
}

impl OpenAiEmbedder {
    /// Connects to `url` for `model` and learns the dimension from one request.
    pub fn connect(url: &str, model: &str, key: Option<String>) -> Result<Self, EmbedError> {
        let base = url.trim_end_matches('/');
        let url = if base.ends_with("/embeddings") {
            base.to_string()
        } else {
            format!("{base}/embeddings")
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(TIMEOUT))
            .http_status_as_error(false)
            .build()
            .into();
        let mut e = OpenAiEmbedder {
            agent,
            id: format!("openai:{url}#{model}"),
            url,
            model: model.to_string(),
            key: key.filter(|k| !k.is_empty()),
            dim: 0,
        };
        let probe = e.request(&["dimension probe"])?;
        e.dim = probe.first().map_or(0, Vec::len);
        if e.dim == 0 {
            return Err(EmbedError::Remote(format!(
                "{}: the endpoint answered an empty vector",
                e.url
            )));
        }
        Ok(e)
    }

    fn attempt(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, (bool, String)> {
        let mut req = self.agent.post(&self.url);
        if let Some(k) = &self.key {
            req = req.header("Authorization", format!("Bearer {k}"));
        }
        let body = json!({"model": self.model, "input": texts});
        let mut resp = match req.send_json(&body) {
            Ok(r) => r,
            // Transport errors (refused, reset, timed out) are worth another try.
            Err(e) => return Err((true, e.to_string())),
        };
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(256 * 1024 * 1024)
            .read_to_string()
            .map_err(|e| (true, e.to_string()))?;
        if status != 200 {
            let retry = status == 408 || status == 429 || status >= 500;
            let msg = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| {
                    v.pointer("/error/message")
                        .or_else(|| v.get("error"))
                        .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_string))
                })
                .unwrap_or_else(|| text.chars().take(200).collect());
            return Err((retry, format!("HTTP {status}: {msg}")));
        }
        let v: Value =
            serde_json::from_str(&text).map_err(|e| (false, format!("not JSON: {e}")))?;
        let Some(data) = v.get("data").and_then(Value::as_array) else {
            return Err((false, "the answer has no `data` array".into()));
        };
        if data.len() != texts.len() {
            return Err((
                false,
                format!("asked for {} vectors, got {}", texts.len(), data.len()),
            ));
        }
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for (pos, d) in data.iter().enumerate() {
            let i = d
                .get("index")
                .and_then(Value::as_u64)
                .map_or(pos, |i| i as usize);
            let Some(slot) = out.get_mut(i) else {
                return Err((false, format!("index {i} out of range")));
            };
            let Some(emb) = d.get("embedding").and_then(Value::as_array) else {
                return Err((
                    false,
                    "an item has no `embedding` array (base64 is not requested)".into(),
                ));
            };
            let mut v: Vec<f32> = emb
                .iter()
                .map(|x| x.as_f64().map(|f| f as f32))
                .collect::<Option<_>>()
                .ok_or((false, "an embedding holds a non-number".to_string()))?;
            normalize(&mut v);
            *slot = v;
        }
        if self.dim != 0 && out.iter().any(|v| v.len() != self.dim) {
            return Err((
                false,
                format!("the vectors changed dimension (expected {})", self.dim),
            ));
        }
        Ok(out)
    }

    fn request(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut wait = Duration::from_millis(500);
        let mut tries = 0;
        loop {
            match self.attempt(texts) {
                Ok(v) => return Ok(v),
                Err((retry, msg)) => {
                    if !retry || tries >= RETRIES {
                        return Err(EmbedError::Remote(format!("{}: {msg}", self.url)));
                    }
                    tracing::warn!(url = %self.url, error = %msg, "embeddings request failed; retrying");
                    std::thread::sleep(wait);
                    wait *= 2;
                    tries += 1;
                }
            }
        }
    }
}

impl Embedder for OpenAiEmbedder {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(BATCH) {
            out.extend(self.request(chunk)?);
        }
        Ok(out)
    }
}
