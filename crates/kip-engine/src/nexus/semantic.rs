//! Semantic recall on a nexus: the embedder, the background worker's progress and the
//! re-embedding of stale vectors (the vectors themselves: `crate::semantic`).

use super::*;

impl Nexus {
    /// Turns semantic recall on with `embedder` (see [`crate::semantic`]): SEARCH gets
    /// `MODE "semantic"` and `"hybrid"` (the default mode from then on), and a worker
    /// thread embeds new and changed concepts in the background. Opening with another
    /// model than the stored vectors' drops them and embeds everything again.
    pub fn set_embedder(&mut self, embedder: Arc<dyn kip_embed::Embedder>) -> Result<(), KipError> {
        if let Some(old) = self.semantic.take() {
            old.shutdown();
        }
        self.semantic = Some(crate::semantic::Semantic::start(&self.store, embedder)?);
        Ok(())
    }

    /// The semantic-recall state, when an embedder is set.
    pub fn semantic(&self) -> Option<&Arc<crate::semantic::Semantic>> {
        self.semantic.as_ref()
    }

    /// Waits (at most `timeout`) until every concept written so far is embedded;
    /// `progress` gets the number still waiting. Returns that number (0: all done).
    /// Without an embedder there is nothing to wait for.
    pub fn wait_for_embeddings(
        &self,
        timeout: std::time::Duration,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, KipError> {
        match &self.semantic {
            Some(s) => s.wait_idle(&self.store, timeout, progress),
            None => Ok(0),
        }
    }

    /// Whether a KML command or a memory tool ran through this handle (successful or
    /// not): what `kip exec` uses to decide whether to wait for embeddings.
    pub fn has_written(&self) -> bool {
        self.wrote.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Marks every element whose vector is missing or was made from other text (or by
    /// another model) for embedding; returns how many were marked. The worker then
    /// embeds them ([`Nexus::wait_for_embeddings`] waits for it).
    pub fn mark_stale_embeddings(&self) -> Result<u64, KipError> {
        let Some(s) = &self.semantic else {
            return Err(KipError::internal("no embedder is configured").with_hint(
                "start with --embedder local:DIR or openai:URL#MODEL (or set KIP_EMBEDDER)",
            ));
        };
        let stale = self.read(|r| crate::semantic::stale_elements(r))?;
        let n = self.write(
            |w| -> Result<u64, KipError> { Ok(w.mark_for_embedding(Some(&stale))?) },
            false,
        )?;
        s.nudge();
        Ok(n)
    }
}
