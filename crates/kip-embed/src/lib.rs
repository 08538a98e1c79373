//! Text embedders for kip-nexus semantic recall (`SEARCH ... MODE "semantic"|"hybrid"`).
//!
//! The engine owns the embeddings: agents send text, never vectors. An [`Embedder`] turns
//! texts into unit-length vectors; which one is chosen at start by a spec string
//! ([`EmbedderSpec`], the `--embedder` option / `KIP_EMBEDDER`):
//!
//! - `none` (the default): no embedder; SEARCH is keyword-only.
//! - `local:DIR`: a sentence-transformers model directory (`config.json`,
//!   `tokenizer.json`, `model.safetensors`, `1_Pooling/config.json`, `modules.json`) run
//!   in process on the CPU ([`LocalEmbedder`]: candle for the arithmetic, Hugging Face
//!   `tokenizers` for the word pieces). BERT-architecture models (MiniLM, mpnet-free BERT
//!   variants, BGE, E5, GTE small/base) are supported.
//! - `openai:URL#MODEL`: an OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, Ollama,
//!   vLLM, llama.cpp server), key from `KIP_EMBEDDER_API_KEY` ([`OpenAiEmbedder`]).

mod bert;
mod fast;
mod local;
mod openai;

pub use local::{pin_thread_count, LocalEmbedder};
pub use openai::OpenAiEmbedder;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

/// What went wrong while loading or running an embedder.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// The spec string or the model directory is not usable.
    #[error("embedder configuration: {0}")]
    Config(String),
    /// The model failed while computing embeddings.
    #[error("embedding model: {0}")]
    Model(String),
    /// The remote endpoint answered something unusable.
    #[error("embeddings endpoint: {0}")]
    Remote(String),
    /// The request to the remote endpoint failed (after retries).
    #[error("embeddings endpoint: {0}")]
    Http(#[from] kip_openai::HttpError),
}

/// Turns texts into vectors of one fixed dimension, L2-normalized (so a dot product is
/// the cosine similarity).
pub trait Embedder: Send + Sync + fmt::Debug {
    /// A stable identity of the model and its weights. Stored with every vector: when it
    /// changes, every stored vector is stale.
    fn model_id(&self) -> &str;
    /// The vectors' dimension.
    fn dim(&self) -> usize;
    /// One vector per text, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// Which embedder to use, parsed from `none`, `local:DIR` or `openai:URL#MODEL`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum EmbedderSpec {
    /// Keyword-only search.
    #[default]
    None,
    /// A sentence-transformers directory run in process.
    Local(PathBuf),
    /// An OpenAI-compatible embeddings endpoint.
    OpenAi {
        /// The base URL (`http://host:11434/v1`) or the full `.../embeddings` URL.
        url: String,
        /// The model name sent in each request.
        model: String,
    },
}

impl FromStr for EmbedderSpec {
    type Err = EmbedError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() || s == "none" {
            return Ok(EmbedderSpec::None);
        }
        if let Some(dir) = s.strip_prefix("local:") {
            if dir.is_empty() {
                return Err(EmbedError::Config(
                    "`local:` needs a model directory, e.g. local:/models/all-MiniLM-L6-v2".into(),
                ));
            }
            return Ok(EmbedderSpec::Local(PathBuf::from(dir)));
        }
        if let Some(rest) = s.strip_prefix("openai:") {
            let Some((url, model)) = rest.rsplit_once('#') else {
                return Err(EmbedError::Config(
                    "`openai:` needs a URL and a model: openai:http://localhost:11434/v1#nomic-embed-text".into(),
                ));
            };
            if !(url.starts_with("http://") || url.starts_with("https://")) || model.is_empty() {
                return Err(EmbedError::Config(format!(
                    "`openai:{rest}`: the URL must start with http:// or https:// and a model must follow '#'"
                )));
            }
            return Ok(EmbedderSpec::OpenAi {
                url: url.to_string(),
                model: model.to_string(),
            });
        }
        Err(EmbedError::Config(format!(
            "unknown embedder `{s}`: use none, local:DIR or openai:URL#MODEL"
        )))
    }
}

impl fmt::Display for EmbedderSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmbedderSpec::None => f.write_str("none"),
            EmbedderSpec::Local(dir) => write!(f, "local:{}", dir.display()),
            EmbedderSpec::OpenAi { url, model } => write!(f, "openai:{url}#{model}"),
        }
    }
}

impl EmbedderSpec {
    /// Loads the embedder the spec names (`None` for `none`). A local model is read and
    /// checked; a remote endpoint is asked once for the dimension, so a wrong URL, model
    /// or key fails here, at start, rather than on the first write.
    pub fn open(&self) -> Result<Option<Arc<dyn Embedder>>, EmbedError> {
        Ok(match self {
            EmbedderSpec::None => None,
            EmbedderSpec::Local(dir) => Some(Arc::new(LocalEmbedder::open(dir)?)),
            EmbedderSpec::OpenAi { url, model } => Some(Arc::new(OpenAiEmbedder::connect(
                url,
                model,
                std::env::var("KIP_EMBEDDER_API_KEY").ok(),
            )?)),
        })
    }
}

/// The dot product of two vectors (the cosine of unit vectors), over the shorter
/// length. Eight running sums, so the compiler can use SIMD lanes (one running sum must
/// add in order and stays scalar: 4x slower at 384 dimensions).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// A vector quantized to signed bytes with one scale: `x[i] ≈ q[i] * scale`
/// (`scale = max |x[i]| / 127`). A quarter of the f32 memory; for unit vectors of
/// sentence models the cosine moves by well under 0.01 (tested).
pub fn quantize(v: &[f32]) -> (Vec<i8>, f32) {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        return (vec![0; v.len()], 0.0);
    }
    let scale = max / 127.0;
    let q = v
        .iter()
        .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8)
        .collect();
    (q, scale)
}

/// `dot(a, b)` of an f32 vector with a quantized one's bytes (multiply by its scale to
/// get the dot with the vector it stands for). Eight running sums, as in [`dot`].
/// Always inlined, so that [`dot_i8_wide`] compiles it with its instruction set.
#[inline(always)]
pub fn dot_i8(a: &[f32], b: &[i8]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * f32::from(y[i]);
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += x * f32::from(*y);
    }
    s
}

/// [`dot_i8`] compiled for the best instruction set this CPU has (AVX2 and FMA where
/// present, chosen at run time by `pulp`) instead of the x86-64 baseline (SSE2) the
/// binary is built for: the same arithmetic lane for lane, so the same result, about
/// twice as fast (docs/performance-history.md, "Vector dot products compiled for the CPU at run time"). Not `#[inline]` on purpose:
/// compiled here, with this crate's optimization level, also in test builds of callers.
pub fn dot_i8_wide(a: &[f32], b: &[i8]) -> f32 {
    struct Op<'a>(&'a [f32], &'a [i8]);
    impl pulp::WithSimd for Op<'_> {
        type Output = f32;
        #[inline(always)]
        fn with_simd<S: pulp::Simd>(self, _: S) -> f32 {
            dot_i8(self.0, self.1)
        }
    }
    pulp::Arch::new().dispatch(Op(a, b))
}

/// [`dot_i8i8`] compiled for the best instruction set this CPU has, as [`dot_i8_wide`].
pub fn dot_i8i8_wide(a: &[i8], b: &[i8]) -> i32 {
    struct Op<'a>(&'a [i8], &'a [i8]);
    impl pulp::WithSimd for Op<'_> {
        type Output = i32;
        #[inline(always)]
        fn with_simd<S: pulp::Simd>(self, _: S) -> i32 {
            dot_i8i8(self.0, self.1)
        }
    }
    pulp::Arch::new().dispatch(Op(a, b))
}

/// The dot product of two quantized vectors' bytes, exact in integers. Always inlined,
/// as [`dot_i8`].
#[inline(always)]
pub fn dot_i8i8(a: &[i8], b: &[i8]) -> i32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0i32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..16 {
            acc[i] += i32::from(x[i]) * i32::from(y[i]);
        }
    }
    let mut s: i32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += i32::from(*x) * i32::from(*y);
    }
    s
}

/// Scales a vector to unit length (left as is when it is all zeros).
pub fn normalize(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        for x in v.iter_mut() {
            *x /= n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantized_dots_stay_close() {
        // Pseudo-random unit vectors of 384 dimensions.
        let mut seed = 7u64;
        let mut unit = || {
            let mut v: Vec<f32> = (0..384)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((seed >> 33) as f32 / (1u64 << 31) as f32) - 0.5
                })
                .collect();
            normalize(&mut v);
            v
        };
        for _ in 0..50 {
            let (a, b) = (unit(), unit());
            let (qa, sa) = quantize(&a);
            let (qb, sb) = quantize(&b);
            let exact = dot(&a, &b);
            assert!((dot_i8(&a, &qb) * sb - exact).abs() < 0.01);
            assert!((dot_i8i8(&qa, &qb) as f32 * sa * sb - exact).abs() < 0.01);
        }
        assert_eq!(quantize(&[0.0, 0.0]), (vec![0, 0], 0.0));
        assert_eq!(quantize(&[0.5, -1.0]).0, vec![64, -127]);
        assert_eq!(dot_i8i8(&[1; 19], &[-2; 19]), -38);
        assert_eq!(dot_i8(&[1.0; 19], &[3; 19]), 57.0);
    }

    #[test]
    fn the_wide_dots_give_the_same_bits() {
        let mut seed = 11u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as u32
        };
        for n in [0usize, 1, 7, 8, 15, 16, 17, 33, 384, 388, 1000] {
            let f: Vec<f32> = (0..n)
                .map(|_| (next() as f32 / u32::MAX as f32) * 2.0 - 1.0)
                .collect();
            let a: Vec<i8> = (0..n).map(|_| (next() % 255) as i32 as i8).collect();
            let b: Vec<i8> = (0..n).map(|_| (next() % 255) as i32 as i8).collect();
            assert_eq!(
                dot_i8_wide(&f, &a).to_bits(),
                dot_i8(&f, &a).to_bits(),
                "{n}"
            );
            assert_eq!(dot_i8i8_wide(&a, &b), dot_i8i8(&a, &b), "{n}");
        }
        // Rows of the extremes: the integer sums do not overflow.
        let max = vec![-128i8; 4096];
        assert_eq!(dot_i8i8_wide(&max, &max), 4096 * 128 * 128);
    }

    #[test]
    fn dot_handles_every_length() {
        for n in [0usize, 1, 7, 8, 9, 17, 384] {
            let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
            let b: Vec<f32> = (0..n).map(|i| 1.0 - i as f32 * 0.25).collect();
            let want: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!(
                (dot(&a, &b) - want).abs() <= 1e-3 * want.abs().max(1.0),
                "{n}"
            );
        }
    }

    #[test]
    fn specs_parse_and_print_back() {
        assert_eq!(
            "none".parse::<EmbedderSpec>().ok(),
            Some(EmbedderSpec::None)
        );
        assert_eq!("".parse::<EmbedderSpec>().ok(), Some(EmbedderSpec::None));
        assert_eq!(
            "local:/m/x".parse::<EmbedderSpec>().ok(),
            Some(EmbedderSpec::Local("/m/x".into()))
        );
        let o = "openai:http://h:1/v1#nomic-embed-text"
            .parse::<EmbedderSpec>()
            .ok();
        assert_eq!(
            o,
            Some(EmbedderSpec::OpenAi {
                url: "http://h:1/v1".into(),
                model: "nomic-embed-text".into()
            })
        );
        assert_eq!(
            o.map(|s| s.to_string()).as_deref(),
            Some("openai:http://h:1/v1#nomic-embed-text")
        );
        for bad in [
            "local:",
            "openai:http://h",
            "openai:ftp://h#m",
            "openai:http://h#",
            "tfidf",
        ] {
            assert!(bad.parse::<EmbedderSpec>().is_err(), "{bad}");
        }
    }
}
