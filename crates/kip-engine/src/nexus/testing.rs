//! The test handle ([`Testing`], from [`Nexus::testing`]; feature `testing` only, for
//! the integration tests, benches and examples in kip-open, never for a server): knobs
//! that make rare storage paths (checkpoints by age, folding the index overlay) happen
//! within a test, and a look at the overlay.

use super::Nexus;

/// Test knobs of a nexus; see the module docs. Borrowed from the nexus
/// ([`Nexus::testing`]).
#[derive(Clone, Copy, Debug)]
pub struct Testing<'a> {
    pub(super) nexus: &'a Nexus,
}

impl Testing<'_> {
    /// Sets how old the log's oldest record may get before a checkpoint (default 30 s).
    /// For tests (feature `testing`).
    pub fn set_checkpoint_age(&self, age: std::time::Duration) {
        if let Some(l) = self.nexus.store.local_log() {
            l.set_checkpoint_age(age);
        }
    }

    /// Makes a write transaction fold its index changes into the tables once it holds
    /// `n` of them (default 524,288). For tests (feature `testing`).
    pub fn set_max_txn_index_changes(&self, n: usize) {
        if let Some(l) = self.nexus.store.local_log() {
            l.set_max_txn_index_changes(n);
        }
    }

    /// Index entries held in the in-memory overlay (not yet folded into the tables, or
    /// folded but still needed by an older reader).
    pub fn overlay_entries(&self) -> usize {
        self.nexus
            .store
            .local_log()
            .map_or(0, |l| l.overlay_entries())
    }
}
