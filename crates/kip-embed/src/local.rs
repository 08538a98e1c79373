//! `local:DIR`: a sentence-transformers model directory run in process on the CPU.

use crate::bert::{self, Act, Bert, BertConfig};
use crate::fast::{self, Fast};
use crate::{EmbedError, Embedder};
use candle_core::{DType, Tensor};
use candle_nn::VarBuilder;
use serde_json::Value;
use std::fmt;
use std::path::Path;
use tokenizers::{Tokenizer, TruncationParams};

/// Texts per forward pass (sorted by length first, so a batch pads little).
const BATCH: usize = 32;

/// The longest text (in tokens) that runs through the single-text path
/// ([`crate::fast`]), alone or with others of a batch ([`FAST_CHUNK_TOKENS`]); longer
/// ones go through candle (padded batches; ~10% slower for one 150-token text, and
/// the path the long golden texts check).
const FAST_TOKENS: usize = 64;

/// Tokens the single-text path takes per forward pass when several texts are embedded
/// at once (the rows of every dense layer's product; each weight block widened once is
/// used for all of them).
const FAST_CHUNK_TOKENS: usize = 256;

/// A sentence-transformers model (BERT encoder, mean or CLS pooling, optional
/// normalization) loaded from a directory.
pub struct LocalEmbedder {
    model: Bert,
    /// The single-text layout of the same weights (`None` for a model whose weights do
    /// not fit half floats).
    fast: Option<Fast>,
    tokenizer: Tokenizer,
    id: String,
    dim: usize,
    mean_pooling: bool,
    normalize: bool,
}

impl fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("id", &self.id)
            .field("dim", &self.dim)
            .finish_non_exhaustive()
    }
}

fn read_json(path: &Path) -> Result<Value, EmbedError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| EmbedError::Config(format!("{}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| EmbedError::Config(format!("{}: {e}", path.display())))
}

fn model_err(e: impl fmt::Display) -> EmbedError {
    EmbedError::Model(e.to_string())
}

impl LocalEmbedder {
    /// Loads the model in `dir`: `config.json` (a BERT encoder), `tokenizer.json`,
    /// `model.safetensors`, and when present `sentence_bert_config.json` (the maximum
    /// sequence length, 256 by default), `1_Pooling/config.json` (mean or CLS pooling,
    /// mean by default) and `modules.json` (normalization when it lists a `Normalize`
    /// module; always when there is no `modules.json`).
    pub fn open(dir: &Path) -> Result<LocalEmbedder, EmbedError> {
        if !dir.is_dir() {
            return Err(EmbedError::Config(format!(
                "{} is not a model directory (expected config.json, tokenizer.json and model.safetensors in it)",
                dir.display()
            )));
        }
        let cfg_value = read_json(&dir.join("config.json"))?;
        let cfg: BertConfig = serde_json::from_value(cfg_value.clone())
            .map_err(|e| EmbedError::Config(format!("config.json: {e}")))?;
        if let Some(t) = cfg.model_type.as_deref() {
            if t != "bert" {
                return Err(EmbedError::Config(format!(
                    "config.json: model_type `{t}` is not supported (BERT encoders only)"
                )));
            }
        }
        if let Some(p) = cfg.position_embedding_type.as_deref() {
            if p != "absolute" {
                return Err(EmbedError::Config(format!(
                    "config.json: position_embedding_type `{p}` is not supported (absolute only)"
                )));
            }
        }
        if cfg.num_attention_heads == 0
            || cfg.hidden_size == 0
            || cfg.intermediate_size == 0
            || !cfg.hidden_size.is_multiple_of(cfg.num_attention_heads)
        {
            return Err(EmbedError::Config(
                "config.json: hidden_size must be a positive multiple of num_attention_heads (and intermediate_size positive)".into(),
            ));
        }
        let act = Act::parse(&cfg.hidden_act).ok_or_else(|| {
            EmbedError::Config(format!(
                "config.json: hidden_act `{}` is not supported",
                cfg.hidden_act
            ))
        })?;
        let st = dir.join("sentence_bert_config.json");
        let max_len = if st.exists() {
            read_json(&st)?
                .get("max_seq_length")
                .and_then(Value::as_u64)
                .unwrap_or(256) as usize
        } else {
            256
        }
        .min(cfg.max_position_embeddings);
        let pooling = dir.join("1_Pooling").join("config.json");
        let mean_pooling = if pooling.exists() {
            let p = read_json(&pooling)?;
            let on = |k: &str| p.get(k).and_then(Value::as_bool).unwrap_or(false);
            if on("pooling_mode_mean_tokens") {
                true
            } else if on("pooling_mode_cls_token") {
                false
            } else {
                return Err(EmbedError::Config(
                    "1_Pooling/config.json: only mean or CLS pooling is supported".into(),
                ));
            }
        } else {
            true
        };
        let modules = dir.join("modules.json");
        let normalize = if modules.exists() {
            read_json(&modules)?.as_array().is_some_and(|m| {
                m.iter().any(|x| {
                    x.get("type")
                        .and_then(Value::as_str)
                        .is_some_and(|t| t.ends_with("Normalize"))
                })
            })
        } else {
            true
        };
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| EmbedError::Config(format!("tokenizer.json: {e}")))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_len,
                ..Default::default()
            }))
            .map_err(|e| EmbedError::Config(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(None);
        let weights_path = dir.join("model.safetensors");
        let weights = std::fs::read(&weights_path)
            .map_err(|e| EmbedError::Config(format!("{}: {e}", weights_path.display())))?;
        let crc = crc32fast::hash(&weights);
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &bert::cpu())
            .map_err(|e| EmbedError::Config(format!("model.safetensors: {e}")))?;
        let model = Bert::load(vb, &cfg, act)
            .map_err(|e| EmbedError::Config(format!("model.safetensors: {e}")))?;
        let fast = Fast::from_bert(&model)
            .map_err(|e| EmbedError::Config(format!("model.safetensors: {e}")))?;
        let name = dir
            .canonicalize()
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "model".into());
        Ok(LocalEmbedder {
            id: format!("local:{name}@{crc:08x}"),
            dim: cfg.hidden_size,
            model,
            fast,
            tokenizer,
            mean_pooling,
            normalize,
        })
    }

    /// Texts of at most [`FAST_TOKENS`] tokens through the single-text path, several
    /// per forward pass (up to [`FAST_CHUNK_TOKENS`] tokens together; no padding):
    /// `(index in texts, vector)`. Returns the indexes it left to candle too (longer
    /// texts, or all of them when the model has no such path).
    #[allow(clippy::type_complexity)]
    fn run_fast(&self, texts: &[&str]) -> Result<(Vec<(usize, Vec<f32>)>, Vec<usize>), EmbedError> {
        let Some(fast) = &self.fast else {
            return Ok((Vec::new(), (0..texts.len()).collect()));
        };
        let encodings = match texts {
            [one] => vec![self.tokenizer.encode(*one, true).map_err(model_err)?],
            _ => self
                .tokenizer
                .encode_batch(texts.to_vec(), true)
                .map_err(model_err)?,
        };
        let limit = FAST_TOKENS.min(self.model.max_positions);
        let (short, long): (Vec<usize>, Vec<usize>) = (0..texts.len()).partition(|&i| {
            let n = encodings[i].get_ids().len();
            n > 0 && n <= limit
        });
        let mut done = Vec::with_capacity(short.len());
        let mut chunk: Vec<usize> = Vec::new();
        let mut tokens = 0;
        let mut run = |chunk: &mut Vec<usize>| -> Result<(), EmbedError> {
            let seqs: Vec<&[u32]> = chunk.iter().map(|&i| encodings[i].get_ids()).collect();
            let states = fast.forward(&seqs).map_err(model_err)?;
            let mut at = 0;
            for (&i, seq) in chunk.iter().zip(&seqs) {
                let rows = &states[at * self.dim..(at + seq.len()) * self.dim];
                at += seq.len();
                done.push((i, self.pool(rows)));
            }
            chunk.clear();
            Ok(())
        };
        for i in short {
            let n = encodings[i].get_ids().len();
            if !chunk.is_empty() && tokens + n > FAST_CHUNK_TOKENS {
                run(&mut chunk)?;
                tokens = 0;
            }
            chunk.push(i);
            tokens += n;
        }
        if !chunk.is_empty() {
            run(&mut chunk)?;
        }
        Ok((done, long))
    }

    /// One text's vector from its token states (row per token).
    fn pool(&self, states: &[f32]) -> Vec<f32> {
        if self.mean_pooling {
            fast::mean_pool(states, self.dim, self.normalize)
        } else {
            let mut cls = states[..self.dim].to_vec();
            if self.normalize {
                let n = cls.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
                cls.iter_mut().for_each(|v| *v /= n);
            }
            cls
        }
    }

    /// The texts at `which` through candle, shortest first, so that each batch pads to
    /// a length close to its own texts'.
    fn run_batches(
        &self,
        texts: &[&str],
        mut which: Vec<usize>,
        out: &mut [Vec<f32>],
    ) -> Result<(), EmbedError> {
        which.sort_by_key(|&i| texts[i].len());
        for chunk in which.chunks(BATCH) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
            for (&i, v) in chunk.iter().zip(self.run_batch(&batch)?) {
                out[i] = v;
            }
        }
        Ok(())
    }

    /// The texts through candle only (the path texts longer than [`FAST_TOKENS`] take),
    /// for tests comparing the two paths.
    #[doc(hidden)]
    pub fn embed_through_candle(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        self.run_batches(texts, (0..texts.len()).collect(), &mut out)?;
        Ok(out)
    }

    /// The texts through candle, padded to the longest of them.
    fn run_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(model_err)?;
        let seq = encodings
            .iter()
            .map(|e| e.get_ids().len())
            .max()
            .unwrap_or(0)
            .clamp(1, self.model.max_positions);
        let mut ids = Vec::with_capacity(texts.len() * seq);
        let mut mask = Vec::with_capacity(texts.len() * seq);
        for e in &encodings {
            let got = e.get_ids();
            let n = got.len().min(seq);
            ids.extend_from_slice(&got[..n]);
            mask.extend(std::iter::repeat_n(1u32, n));
            ids.extend(std::iter::repeat_n(0u32, seq - n));
            mask.extend(std::iter::repeat_n(0u32, seq - n));
        }
        let device = bert::cpu();
        let shape = (texts.len(), seq);
        let ids = Tensor::from_vec(ids, shape, &device).map_err(model_err)?;
        let mask = Tensor::from_vec(mask, shape, &device).map_err(model_err)?;
        let states = self.model.forward(&ids, &mask).map_err(model_err)?;
        let pooled = if self.mean_pooling {
            bert::mean_pool_normalized(&states, &mask, self.normalize)
        } else {
            let cls = states.narrow(1, 0, 1).and_then(|t| t.squeeze(1));
            cls.and_then(|c| {
                if self.normalize {
                    let n = c.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12f64, f64::MAX)?;
                    c.broadcast_div(&n)
                } else {
                    Ok(c)
                }
            })
        }
        .map_err(model_err)?;
        pooled.to_vec2::<f32>().map_err(model_err)
    }
}

/// Fixes the number of threads of the model's arithmetic for the whole process, by
/// setting `RAYON_NUM_THREADS` to the machine's available parallelism when it is not
/// set already (a value the user set is kept). Returns the value in force.
///
/// Why: candle asks for its thread count before every matrix product and element-wise
/// operation, and without `RAYON_NUM_THREADS` it counts the physical cores again each
/// time, which on Linux reads `/proc/cpuinfo`: dozens of reads for one query text. With
/// the variable set, a query of a few words or a sentence embeds 1.2-1.4x faster
/// (docs/performance-history.md, "Session 16"); batches are unchanged. The thread count is
/// the one rayon would choose (candle would count physical cores, the same on machines
/// without SMT).
///
/// Call it at the start of `main`, before any other thread exists: changing the
/// environment while another thread reads it is a data race in the C library.
pub fn pin_thread_count() -> usize {
    if let Some(n) = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
    {
        return n;
    }
    let n = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    std::env::set_var("RAYON_NUM_THREADS", n.to_string());
    n
}

impl Embedder for LocalEmbedder {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        let (done, rest) = self.run_fast(texts)?;
        for (i, v) in done {
            out[i] = v;
        }
        self.run_batches(texts, rest, &mut out)?;
        Ok(out)
    }
}
