//! The recall handle ([`Recall`], from [`Nexus::recall`]): semantic recall on a nexus
//! (the vectors, the worker and the index themselves are [`crate::semantic`]): its
//! state, waiting for the background worker, re-embedding stale vectors, and whether
//! anything was written (what decides whether there is anything to wait for).
//!
//! Turning recall on is [`Nexus::set_embedder`], not a method here: it replaces the
//! nexus's embedder and worker, so it takes `&mut Nexus`, which a handle borrowed from
//! a shared nexus cannot give; like [`Nexus::set_limits`] it is configuration, done
//! once after opening, before the nexus is shared.

use super::Nexus;
use kip_lang::KipError;
use std::sync::Arc;

/// Semantic recall on a nexus; see the module docs. Borrowed from the nexus
/// ([`Nexus::recall`]) and as cheap to make as a reference.
#[derive(Clone, Copy, Debug)]
pub struct Recall<'a> {
    pub(super) nexus: &'a Nexus,
}

impl<'a> Recall<'a> {
    /// The semantic-recall state, when an embedder is set.
    pub fn semantic(&self) -> Option<&'a Arc<crate::semantic::Semantic>> {
        self.nexus.semantic.as_ref()
    }

    /// Waits (at most `timeout`) until every concept written so far is embedded;
    /// `progress` gets the number still waiting. Returns that number (0: all done).
    /// Without an embedder there is nothing to wait for.
    pub fn wait_for_embeddings(
        &self,
        timeout: std::time::Duration,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, KipError> {
        match &self.nexus.semantic {
            Some(s) => s.wait_idle(&self.nexus.store, timeout, progress),
            None => Ok(0),
        }
    }

    /// Whether a KML command or a memory tool ran through this nexus (successful or
    /// not): what `kip exec` uses to decide whether to wait for embeddings.
    pub fn has_written(&self) -> bool {
        self.nexus.wrote.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Marks every element whose vector is missing or was made from other text (or by
    /// another model) for embedding; returns how many were marked. The worker then
    /// embeds them ([`Recall::wait_for_embeddings`] waits for it).
    pub fn mark_stale_embeddings(&self) -> Result<u64, KipError> {
        let Some(s) = &self.nexus.semantic else {
            return Err(KipError::internal("no embedder is configured").with_hint(
                "start with --embedder local:DIR or openai:URL#MODEL (or set KIP_EMBEDDER)",
            ));
        };
        let stale = self.nexus.read(|r| crate::semantic::stale_elements(r))?;
        let n = self.nexus.write(
            |w| -> Result<u64, KipError> { Ok(w.mark_for_embedding(Some(&stale))?) },
            false,
        )?;
        s.nudge();
        Ok(n)
    }
}
