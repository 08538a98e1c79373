//! After a PURGE (Specification §60.3): the content it destroyed must not stay in the
//! audit log's command texts and parameters either. The purge's transaction leaves the
//! strings to look for in `meta` ([`PENDING`]), durably with the purge; the runtime
//! scrubs the log once the purge has committed, and an open finishes a scrub that a
//! crash interrupted. Then the pending list is cleared, and a backend with a log of
//! its own (redb's write-ahead log) empties the log file, which still held the
//! records that wrote the content.

use super::Nexus;
use crate::store::GraphWrite;
use kip_lang::KipError;
use std::cell::Cell;

/// `meta` key: the strings whose audit records are still to be scrubbed (a JSON list).
pub(crate) const PENDING: &str = "kip2.audit_scrub_pending";

thread_local! {
    /// Set when a write on this thread deferred a scrub: the runtime's writes run on
    /// the calling thread, so a write after which it is unset needs no look at the
    /// pending list (a `meta` read, a round trip on PostgreSQL). A purge whose
    /// transaction then aborts leaves it set: one read too many, never one too few.
    static DEFERRED: Cell<bool> = const { Cell::new(false) };
}

/// Adds `needles` to the pending scrub, inside the purge's transaction.
pub(crate) fn defer(w: &mut dyn GraphWrite, needles: Vec<String>) -> Result<(), KipError> {
    if needles.is_empty() {
        return Ok(());
    }
    DEFERRED.set(true);
    let mut all = pending(w)?;
    for n in needles {
        if !all.contains(&n) {
            all.push(n);
        }
    }
    let bytes =
        serde_json::to_vec(&all).map_err(|e| KipError::internal(format!("scrub list: {e}")))?;
    w.set_meta(PENDING, &bytes)?;
    Ok(())
}

fn pending(g: &dyn crate::store::GraphRead) -> Result<Vec<String>, KipError> {
    Ok(g.meta(PENDING)?
        .filter(|b| !b.is_empty())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default())
}

impl Nexus {
    /// [`Nexus::scrub_purged`], with a failure logged: the purge has committed, and the
    /// pending list stays for the next purge or open to finish.
    pub(crate) fn finish_purge_scrub(&self) {
        if !DEFERRED.take() {
            return;
        }
        if let Err(e) = self.scrub_purged() {
            tracing::warn!(
                "audit log: the scrub after a purge failed ({}); it is retried at the next purge or open",
                e.message
            );
        }
    }

    /// Scrubs the audit log of what committed purges left pending, then clears the
    /// list (a no-op when nothing is pending: one `meta` read). Returns the records
    /// rewritten.
    pub(crate) fn scrub_purged(&self) -> Result<u64, KipError> {
        let needles = self.read(|g| pending(g))?;
        if needles.is_empty() {
            return Ok(0);
        }
        let n = self.audit.scrub(&needles)?;
        // The write-ahead log still holds the records that wrote the content.
        if let Some(log) = self.store.local_log() {
            log.erase_log()?;
        }
        self.write(
            |w| {
                // Only what was scrubbed: a purge that committed meanwhile stays.
                let left: Vec<String> = pending(w)?
                    .into_iter()
                    .filter(|x| !needles.contains(x))
                    .collect();
                let bytes = if left.is_empty() {
                    Vec::new()
                } else {
                    serde_json::to_vec(&left)
                        .map_err(|e| KipError::internal(format!("scrub list: {e}")))?
                };
                w.set_meta(PENDING, &bytes)?;
                Ok(())
            },
            false,
        )?;
        Ok(n)
    }
}
