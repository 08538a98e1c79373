//! The footprint report behind `kip storage stats` ([`Admin::storage_usage`], a method
//! of the administration handle): the backend's own measurement of each table and file,
//! with the element counts that make it bytes per concept and per link
//! (docs/storage.md §6).

use super::*;
use kip_storage::usage::StorageUsage;

/// What the store takes, with the elements it holds.
#[derive(Clone, Debug, serde::Serialize)]
pub struct UsageReport {
    /// The kind of storage (`embedded`, `postgresql`).
    pub backend: &'static str,
    /// Where it lives (never a password).
    pub location: String,
    /// Concepts in the graph.
    pub concepts: u64,
    /// Links (propositions) in the graph.
    pub links: u64,
    /// The backend's measurement.
    #[serde(flatten)]
    pub usage: StorageUsage,
}

impl UsageReport {
    /// The whole footprint divided over the elements (0 for an empty graph).
    pub fn bytes_per_element(&self) -> f64 {
        let elements = self.concepts.saturating_add(self.links);
        if elements == 0 {
            0.0
        } else {
            self.usage.total_bytes as f64 / elements as f64
        }
    }
}

impl Admin<'_> {
    /// The store's footprint by table and file (checkpointed first, so a local log's
    /// contents are in the tables they belong to), and the graph's size.
    pub fn storage_usage(&self) -> Result<UsageReport, KipError> {
        if let Some(log) = self.nexus.store.local_log() {
            log.checkpoint()?;
        }
        let usage = self.nexus.store.storage_usage()?;
        let (concepts, links) = self.nexus.read(|r| Ok(r.totals()?))?;
        Ok(UsageReport {
            backend: self.nexus.store.kind(),
            location: self.nexus.store.location(),
            concepts,
            links,
            usage,
        })
    }
}
