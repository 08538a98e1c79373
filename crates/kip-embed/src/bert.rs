//! The BERT encoder of a sentence-transformers model, run on the CPU with candle.
//!
//! Only the forward pass of inference: word + position + token-type embeddings, then
//! `num_hidden_layers` of (self-attention, add & norm, feed-forward with exact GELU, add &
//! norm), as Hugging Face's `BertModel` computes it. Weights are read from the model's
//! `model.safetensors` under the names `transformers` gives them (with or without the
//! `bert.` prefix). The tensor library (candle) does the arithmetic; this file only
//! wires its layers the way the architecture does, which is why it does not pull in
//! candle-transformers (a crate of ~150 models that would double the build time for the
//! one used here).

use candle_core::{DType, Device, Module, Tensor, D};
use candle_nn::{embedding, layer_norm, linear, Embedding, LayerNorm, Linear, VarBuilder};
use serde::Deserialize;

/// The fields of a Hugging Face `config.json` the encoder needs.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub model_type: Option<String>,
    #[serde(default)]
    pub position_embedding_type: Option<String>,
}

fn default_act() -> String {
    "gelu".into()
}
fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}

pub(crate) struct SelfAttention {
    pub(crate) query: Linear,
    pub(crate) key: Linear,
    pub(crate) value: Linear,
    heads: usize,
    head_dim: usize,
}

/// The feed-forward activation named by `hidden_act`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Act {
    /// `gelu`: the exact (erf) GELU.
    Gelu,
    /// `gelu_new`, `gelu_pytorch_tanh`: the tanh approximation.
    GeluTanh,
    /// `relu`.
    Relu,
}

impl Act {
    pub(crate) fn parse(name: &str) -> Option<Act> {
        match name {
            "gelu" => Some(Act::Gelu),
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Some(Act::GeluTanh),
            "relu" => Some(Act::Relu),
            _ => None,
        }
    }
}

pub(crate) struct Layer {
    act: Act,
    pub(crate) attention: SelfAttention,
    pub(crate) attention_out: Linear,
    pub(crate) attention_norm: LayerNorm,
    pub(crate) intermediate: Linear,
    pub(crate) output: Linear,
    pub(crate) output_norm: LayerNorm,
}

/// The loaded encoder.
pub(crate) struct Bert {
    pub(crate) words: Embedding,
    pub(crate) positions: Embedding,
    pub(crate) token_types: Embedding,
    pub(crate) norm: LayerNorm,
    pub(crate) layers: Vec<Layer>,
    pub(crate) max_positions: usize,
    pub(crate) hidden: usize,
    pub(crate) heads: usize,
    pub(crate) act: Act,
}

impl Bert {
    /// Loads the weights; `vb` is rooted at the model (the `bert.` prefix is tried too).
    pub(crate) fn load(vb: VarBuilder, cfg: &BertConfig, act: Act) -> candle_core::Result<Bert> {
        let vb = if vb.contains_tensor("embeddings.word_embeddings.weight") {
            vb
        } else {
            vb.pp("bert")
        };
        let h = cfg.hidden_size;
        let e = vb.pp("embeddings");
        let words = embedding(cfg.vocab_size, h, e.pp("word_embeddings"))?;
        let positions = embedding(cfg.max_position_embeddings, h, e.pp("position_embeddings"))?;
        let token_types = embedding(cfg.type_vocab_size, h, e.pp("token_type_embeddings"))?;
        let norm = layer_norm(h, cfg.layer_norm_eps, e.pp("LayerNorm"))?;
        let heads = cfg.num_attention_heads;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let l = vb.pp(format!("encoder.layer.{i}"));
            let a = l.pp("attention");
            let s = a.pp("self");
            layers.push(Layer {
                act,
                attention: SelfAttention {
                    query: linear(h, h, s.pp("query"))?,
                    key: linear(h, h, s.pp("key"))?,
                    value: linear(h, h, s.pp("value"))?,
                    heads,
                    head_dim: h / heads,
                },
                attention_out: linear(h, h, a.pp("output.dense"))?,
                attention_norm: layer_norm(h, cfg.layer_norm_eps, a.pp("output.LayerNorm"))?,
                intermediate: linear(h, cfg.intermediate_size, l.pp("intermediate.dense"))?,
                output: linear(cfg.intermediate_size, h, l.pp("output.dense"))?,
                output_norm: layer_norm(h, cfg.layer_norm_eps, l.pp("output.LayerNorm"))?,
            });
        }
        Ok(Bert {
            words,
            positions,
            token_types,
            norm,
            layers,
            max_positions: cfg.max_position_embeddings,
            hidden: h,
            heads,
            act,
        })
    }

    /// The last hidden states `[batch, seq, hidden]` of token ids `[batch, seq]` (u32)
    /// with their attention mask (1 for tokens, 0 for padding; same shape).
    pub(crate) fn forward(&self, ids: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let (batch, seq) = ids.dims2()?;
        let device = ids.device();
        let pos = Tensor::arange(0u32, seq as u32, device)?.unsqueeze(0)?;
        let types = ids.zeros_like()?;
        let x = self
            .words
            .forward(ids)?
            .broadcast_add(&self.positions.forward(&pos)?)?
            .broadcast_add(&self.token_types.forward(&types)?)?;
        let mut x = self.norm.forward(&x)?;
        // Additive mask: 0 where attended, a large negative number on padding, shaped to
        // broadcast over heads and query positions.
        let bias = ((mask.to_dtype(DType::F32)? - 1.0)? * 1e9f64)?.reshape((batch, 1, 1, seq))?;
        for layer in &self.layers {
            x = layer.forward(&x, &bias)?;
        }
        Ok(x)
    }
}

impl SelfAttention {
    fn split(&self, t: Tensor, batch: usize, seq: usize) -> candle_core::Result<Tensor> {
        t.reshape((batch, seq, self.heads, self.head_dim))?
            .transpose(1, 2)?
            .contiguous()
    }

    fn forward(&self, x: &Tensor, bias: &Tensor) -> candle_core::Result<Tensor> {
        let (batch, seq, hidden) = x.dims3()?;
        let q = self.split(self.query.forward(x)?, batch, seq)?;
        let k = self.split(self.key.forward(x)?, batch, seq)?;
        let v = self.split(self.value.forward(x)?, batch, seq)?;
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let scores = (q.matmul(&k.t()?.contiguous()?)? * scale)?.broadcast_add(bias)?;
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        probs
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((batch, seq, hidden))
    }
}

impl Layer {
    fn forward(&self, x: &Tensor, bias: &Tensor) -> candle_core::Result<Tensor> {
        let a = self.attention.forward(x, bias)?;
        let x = self
            .attention_norm
            .forward(&(self.attention_out.forward(&a)? + x)?)?;
        let i = self.intermediate.forward(&x)?;
        let i = match self.act {
            Act::Gelu => i.gelu_erf()?,
            Act::GeluTanh => i.gelu()?,
            Act::Relu => i.relu()?,
        };
        self.output_norm.forward(&(self.output.forward(&i)? + x)?)
    }
}

/// Mean of the token states under the mask, then scaled to unit length:
/// `[batch, seq, hidden]` -> `[batch, hidden]`.
pub(crate) fn mean_pool_normalized(
    states: &Tensor,
    mask: &Tensor,
    normalize: bool,
) -> candle_core::Result<Tensor> {
    let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
    let summed = states.broadcast_mul(&m)?.sum(1)?;
    let counts = m.sum(1)?.clamp(1e-9f64, f64::MAX)?;
    let mean = summed.broadcast_div(&counts)?;
    if !normalize {
        return Ok(mean);
    }
    let norm = mean
        .sqr()?
        .sum_keepdim(D::Minus1)?
        .sqrt()?
        .clamp(1e-12f64, f64::MAX)?;
    mean.broadcast_div(&norm)
}

/// The CPU device (the only one this build uses).
pub(crate) fn cpu() -> Device {
    Device::Cpu
}
