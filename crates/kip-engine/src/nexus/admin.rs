//! The administration handle ([`Admin`], from [`Nexus::admin`]): what an operator
//! does to the store rather than to the knowledge in it. The backend and its data
//! directory, the write-ahead log and checkpoints, prewarming, reindexing, the audit log
//! of the calls made through the interfaces, whole-graph exports and dumps, totals;
//! with `usage.rs` (`storage_usage`) and `check.rs` (`check_integrity`), which add
//! their methods to this handle.
//!
//! None of it changes what an agent reads: these serve the `kip` subcommands (`kip
//! check`, `kip reindex`, `kip storage stats`, `kip export`, `kip logs`, ...) and the
//! server's upkeep (idle checkpoints, prewarm at start, a checkpoint on close).

use super::{Backend, Nexus};
use kip_lang::KipError;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// Storage administration on a nexus; see the module docs. Borrowed from the nexus
/// ([`Nexus::admin`]) and as cheap to make as a reference.
#[derive(Clone, Copy, Debug)]
pub struct Admin<'a> {
    pub(super) nexus: &'a Nexus,
}

impl<'a> Admin<'a> {
    /// Installs a KIP 2.0 Schema Package artifact in the memory and, with `activate`,
    /// makes it part of the memory's Schema Environment (DECISIONS.md item 41: the
    /// owner's operation, not ordinary KML). Idempotent for the same artifact; another
    /// artifact under an installed reference is refused. Returns `{package_ref, active}`.
    pub fn install_schema_package(
        &self,
        artifact: &Value,
        activate: bool,
    ) -> Result<Value, crate::v2::V2Error> {
        let mut failure = None;
        let r = self.nexus.write(
            |w| {
                crate::v2::packages::install(w, artifact, activate).map_err(|e| {
                    failure = Some(e);
                    KipError::internal("the package was not installed")
                })
            },
            false,
        );
        r.map_err(|e| failure.unwrap_or_else(|| crate::v2::V2Error::from_kip(&e)))
    }

    /// The migration preview (`kip migrate --dry-run`): the memory's 1.x inventory and
    /// how KIP 2.0 reads it, with the lossy mappings counted (Migration §3, item 40).
    pub fn migration_report(&self) -> Result<Value, crate::v2::V2Error> {
        let mut failure = None;
        let r = self.nexus.read(|g| {
            crate::v2::migration_report(g).map_err(|e| {
                failure = Some(e);
                KipError::internal("the report failed")
            })
        });
        r.map_err(|e| failure.unwrap_or_else(|| crate::v2::V2Error::from_kip(&e)))
    }

    /// The schema packages installed in the memory (built-in ones first).
    pub fn schema_packages(&self) -> Result<Value, crate::v2::V2Error> {
        let mut failure = None;
        let r = self.nexus.read(|g| {
            crate::v2::packages::listing(g).map_err(|e| {
                failure = Some(e);
                KipError::internal("listing failed")
            })
        });
        r.map_err(|e| failure.unwrap_or_else(|| crate::v2::V2Error::from_kip(&e)))
    }

    /// The storage backend.
    pub fn backend(&self) -> &'a Arc<dyn Backend> {
        &self.nexus.store
    }

    /// The data directory, for an on-disk nexus.
    pub fn path(&self) -> Option<&'a Path> {
        self.nexus.store.path()
    }

    /// Number of concepts and propositions.
    pub fn totals(&self) -> Result<(u64, u64), KipError> {
        self.nexus.read(|r| Ok(r.totals()?))
    }

    /// Every concept and proposition as JSON objects, in id order:
    /// `{"concepts": [...], "propositions": [...]}`.
    pub fn dump(&self) -> Result<Value, KipError> {
        self.nexus.read(|r| {
            let mut concepts = Vec::new();
            r.scan_concepts(&mut |n| {
                if let Some(c) = r.concept(n)? {
                    concepts.push(serde_json::json!({
                        "id": crate::store::ElemRef::Concept(n).id_string(),
                        "type": c.concept_type, "name": c.name,
                        "attributes": c.attributes, "metadata": c.metadata,
                    }));
                }
                Ok(true)
            })?;
            let mut props = Vec::new();
            r.scan_props(&mut |n| {
                if let Some(p) = r.prop(n)? {
                    props.push(serde_json::json!({
                        "id": crate::store::ElemRef::Prop(n).id_string(),
                        "subject": p.subject.id_string(), "predicate": p.predicate,
                        "object": p.object.id_string(),
                        "attributes": p.attributes, "metadata": p.metadata,
                    }));
                }
                Ok(true)
            })?;
            Ok(serde_json::json!({"concepts": concepts, "propositions": props}))
        })
    }

    /// Reads the database file once, sequentially, so the kernel's page cache holds it
    /// and the first queries after a start do not wait for the disk (see
    /// [`LocalLog::prewarm`](super::LocalLog::prewarm)).
    pub fn prewarm(&self, max_bytes: u64) -> std::io::Result<u64> {
        self.nexus
            .store
            .local_log()
            .map_or(Ok(0), |l| l.prewarm(max_bytes))
    }

    /// Bytes of write-ahead log written since the last checkpoint (0 in memory).
    pub fn wal_len(&self) -> u64 {
        self.nexus.store.local_log().map_or(0, |l| l.log_len())
    }

    /// Makes every commit durable in the database file and empties the write-ahead log.
    pub fn checkpoint(&self) -> Result<(), KipError> {
        match self.nexus.store.local_log() {
            Some(l) => Ok(l.checkpoint()?),
            None => Ok(()),
        }
    }

    /// Checkpoints when the log's oldest record is older than the checkpoint age and no
    /// write is under way. Returns whether a checkpoint ran.
    pub fn checkpoint_if_due(&self) -> Result<bool, KipError> {
        match self.nexus.store.local_log() {
            Some(l) => Ok(l.checkpoint_if_due()?),
            None => Ok(false),
        }
    }

    /// Starts the thread that checkpoints the log of an idle nexus within the
    /// checkpoint age (30 s); it ends once the nexus is dropped. See
    /// [`crate::store::backend::start_idle_checkpoints`].
    pub fn start_idle_checkpoints(&self) -> std::io::Result<()> {
        crate::store::backend::start_idle_checkpoints(&self.nexus.store)
    }

    /// Rebuilds the text index and the attribute value index from the graph in one
    /// transaction; `progress(done, total)`.
    pub fn reindex(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<(), KipError> {
        Ok(self.nexus.store.reindex(progress)?)
    }

    /// The whole graph as a KIP capsule that re-imports to the same graph.
    pub fn export_capsule(&self) -> Result<String, KipError> {
        self.nexus.read(|r| crate::export::export_capsule(r))
    }

    /// Writes the export capsule to `out` as it is rendered (one read snapshot; memory
    /// for the sort keys only, not the whole text).
    pub fn export_capsule_to(&self, out: &mut dyn std::io::Write) -> Result<(), KipError> {
        self.nexus
            .read(|r| crate::export::export_capsule_to(r, out))
    }

    /// Cuts the history of the default space below the last commit made at or before
    /// `keep` ago (the newest commit always stays): reads `AS OF` an older coordinate
    /// answer `HistoricalSnapshotUnavailable` from then on. Runs to the end, in
    /// transactions of at most 10,000 changes. Returns the horizon's seq (`None`:
    /// nothing was older) and the changes removed.
    pub fn prune_history(&self, keep: std::time::Duration) -> Result<(Option<u64>, u64), KipError> {
        let before = crate::time::now()
            .checked_sub(keep)
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let mut total = 0u64;
        loop {
            let step = self.nexus.write(
                |w| {
                    Ok(kip_storage::history::prune_before(
                        w,
                        kip_storage::SpaceId::DEFAULT,
                        before,
                        10_000,
                    )?)
                },
                false,
            )?;
            match step {
                None => return Ok((None, total)),
                Some((horizon, n)) => {
                    total += n;
                    if n < 10_000 {
                        return Ok((Some(horizon), total));
                    }
                }
            }
        }
    }

    /// The audit log (see [`crate::audit`]): interfaces record each call in it
    /// ([`Nexus::execute_audited`], [`MemoryTools::call_audited`](super::MemoryTools::call_audited));
    /// operators list, configure and purge it.
    pub fn audit(&self) -> &'a Arc<crate::audit::Audit> {
        &self.nexus.audit
    }
}
