//! `openai:URL#MODEL`: an OpenAI-compatible embeddings endpoint.
//!
//! `POST {URL}/embeddings` (or URL itself when it already ends in `/embeddings`) with
//! `{"model": MODEL, "input": [texts]}`, at most [`BATCH`] texts per request, the key of
//! `KIP_EMBEDDER_API_KEY` as a bearer token. A request that times out, cannot connect,
//! or gets 408/429/5xx is retried [`RETRIES`] times with doubling waits (0.5 s, 1 s,
//! 2 s); other answers fail at once with the endpoint's own message. Vectors are scaled
//! to unit length (not every server does).

use crate::{normalize, EmbedError, Embedder};
use kip_openai::{Client, Policy};
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
    client: Client,
    model: String,
    id: String,
    dim: usize,
}

impl OpenAiEmbedder {
    /// Connects to `url` for `model` and learns the dimension from one request.
    pub fn connect(url: &str, model: &str, key: Option<String>) -> Result<Self, EmbedError> {
        let url = kip_openai::endpoint_url(url, "embeddings");
        let policy = Policy {
            timeout: TIMEOUT,
            retries: RETRIES,
            first_wait: Duration::from_millis(500),
            max_answer_bytes: 256 * 1024 * 1024,
        };
        let mut e = OpenAiEmbedder {
            id: format!("openai:{url}#{model}"),
            client: Client::new(url, key, policy),
            model: model.to_string(),
            dim: 0,
        };
        let probe = e.request(&["dimension probe"])?;
        e.dim = probe.first().map_or(0, Vec::len);
        if e.dim == 0 {
            return Err(EmbedError::Remote(format!(
                "{}: the endpoint answered an empty vector",
                e.client.url()
            )));
        }
        Ok(e)
    }

    /// One request for `texts` (at most [`BATCH`]): their vectors, in order, at unit
    /// length.
    fn request(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let answer = self
            .client
            .post(&json!({"model": self.model, "input": texts}))?;
        self.vectors(&answer, texts.len())
            .map_err(|msg| EmbedError::Remote(format!("{}: {msg}", self.client.url())))
    }

    /// The vectors of an answer to a request for `n` texts.
    fn vectors(&self, answer: &Value, n: usize) -> Result<Vec<Vec<f32>>, String> {
        let Some(data) = answer.get("data").and_then(Value::as_array) else {
            return Err("the answer has no `data` array".into());
        };
        if data.len() != n {
            return Err(format!("asked for {n} vectors, got {}", data.len()));
        }
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); n];
        for (pos, d) in data.iter().enumerate() {
            let i = d
                .get("index")
                .and_then(Value::as_u64)
                .map_or(pos, |i| i as usize);
            let Some(slot) = out.get_mut(i) else {
                return Err(format!("index {i} out of range"));
            };
            let Some(emb) = d.get("embedding").and_then(Value::as_array) else {
                return Err("an item has no `embedding` array (base64 is not requested)".into());
            };
            let mut v: Vec<f32> = emb
                .iter()
                .map(|x| x.as_f64().map(|f| f as f32))
                .collect::<Option<_>>()
                .ok_or_else(|| "an embedding holds a non-number".to_string())?;
            normalize(&mut v);
            *slot = v;
        }
        if self.dim != 0 && out.iter().any(|v| v.len() != self.dim) {
            return Err(format!(
                "the vectors changed dimension (expected {})",
                self.dim
            ));
        }
        Ok(out)
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
