//! Embedders without a model, shared by the engine's tests and examples (included with
//! `#[path]`): a bag of words hashed into a vector, and one that always fails (for
//! code that loads vectors itself).
#![allow(dead_code)]

use kip_embed::{EmbedError, Embedder};

/// The words of a text (split on anything not alphanumeric, lowercased) hashed into
/// `dim` dimensions and normalized: texts sharing words are close.
#[derive(Debug)]
pub struct Words {
    dim: usize,
    id: String,
}

impl Words {
    pub fn new(dim: usize) -> Words {
        Words {
            dim,
            id: format!("test:words-{dim}"),
        }
    }
}

impl Embedder for Words {
    fn model_id(&self) -> &str {
        &self.id
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; self.dim];
                for w in t
                    .to_lowercase()
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                {
                    let h = w.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
                    });
                    v[(h % self.dim as u64) as usize] += 1.0;
                }
                kip_embed::normalize(&mut v);
                v
            })
            .collect())
    }
}

/// An embedder of `dim` dimensions whose every call fails.
#[derive(Debug)]
pub struct Never(pub usize);

impl Embedder for Never {
    fn model_id(&self) -> &str {
        "test:never"
    }
    fn dim(&self) -> usize {
        self.0
    }
    fn embed(&self, _: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Err(EmbedError::Model("this test embedder never embeds".into()))
    }
}
