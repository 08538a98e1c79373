//! Exactly once: the request log as the engine uses it.
//!
//! A request that carries an id (`request_id` in the `execute_kip` arguments; the
//! forwarder of a shared directory gives every forwarded request one) has each of its
//! write statements recorded under `<id>#<index of the statement>` with its outcome,
//! in the transaction that applies the statement. Before a statement of such a
//! request runs, that transaction looks the key up: a statement already applied is
//! answered from its record and not applied again. So a request re-sent to the next
//! owner after the first one died (possibly after committing some of its statements)
//! changes the memory exactly once and answers as the first run did; reads are run
//! again. A failing statement changes nothing and records nothing, so re-sending it
//! runs it again.
//!
//! Records are kept for [`WINDOW`] (far longer than any failover: a forwarder gives up
//! after 5 re-sends of at most 30 s of waiting each, plus the request's own budget),
//! then pruned by the write transactions, at most [`PRUNE_MAX`] at a time, at most
//! every [`PRUNE_EVERY`]. The same log will carry KIP 2.0's idempotency keys.

use crate::store::GraphWrite;
use kip_lang::KipError;
use serde_json::Value;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// How long a request's records are kept.
pub const WINDOW: Duration = Duration::from_secs(15 * 60);
/// How often the write transactions prune old records.
const PRUNE_EVERY: Duration = Duration::from_secs(10);
/// The most records one transaction prunes.
const PRUNE_MAX: usize = 1_000;

/// The key of statement `index` of request `id`.
pub(crate) fn key(id: &str, index: usize) -> String {
    format!("{id}#{index}")
}

fn millis(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Runs a write statement in `w` exactly once per `key`: answered from the record when
/// the key has one, else run and (when it succeeds) recorded in the same transaction.
pub(crate) fn once(
    w: &mut dyn GraphWrite,
    key: Option<&str>,
    run: impl FnOnce(&mut dyn GraphWrite) -> Result<Value, KipError>,
) -> Result<Value, KipError> {
    let Some(key) = key else {
        return run(w);
    };
    if let Some(bytes) = w.request_record(key)? {
        return serde_json::from_slice(&bytes).map_err(|e| {
            KipError::internal(format!(
                "the recorded outcome of request statement {key} cannot be read: {e}"
            ))
        });
    }
    let value = run(w)?;
    let bytes = serde_json::to_vec(&value)
        .map_err(|e| KipError::internal(format!("cannot record an outcome: {e}")))?;
    w.put_request_record(key, millis(crate::time::now()), &bytes)?;
    Ok(value)
}

/// When the write transactions last pruned the log, and how long history is kept.
#[derive(Debug, Default)]
pub(crate) struct Pruner {
    last: Mutex<Option<Instant>>,
    /// How long the space's history is kept (`None`: whole, the default); from
    /// `KIP_HISTORY_KEEP_DAYS`.
    history_keep: Option<Duration>,
    last_history: Mutex<Option<Instant>>,
}

/// How often the write transactions cut history below its horizon.
const HISTORY_EVERY: Duration = Duration::from_secs(60);

/// The history kept, from `KIP_HISTORY_KEEP_DAYS` (days, a number ≥ 0; unset: all).
fn history_keep_from_env() -> Option<Duration> {
    let raw = std::env::var("KIP_HISTORY_KEEP_DAYS").ok()?;
    match raw.trim().parse::<f64>() {
        Ok(d) if d.is_finite() && d >= 0.0 => Some(Duration::from_secs_f64(d * 86_400.0)),
        _ => {
            tracing::warn!(
                "KIP_HISTORY_KEEP_DAYS={raw:?} is not a number of days; history is kept whole"
            );
            None
        }
    }
}

impl Pruner {
    /// A pruner with the history retention of the environment.
    pub(crate) fn from_env() -> Pruner {
        Pruner {
            history_keep: history_keep_from_env(),
            ..Pruner::default()
        }
    }

    /// Cuts history older than the configured retention in `w` when it is time to
    /// (at most [`PRUNE_MAX`] changes a time).
    pub(crate) fn maybe_prune_history(&self, w: &mut dyn GraphWrite) -> Result<(), KipError> {
        let Some(keep) = self.history_keep else {
            return Ok(());
        };
        {
            let mut last = self.last_history.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|l| l.elapsed() < HISTORY_EVERY) {
                return Ok(());
            }
            *last = Some(Instant::now());
        }
        let before = crate::time::now().checked_sub(keep).map_or(0, millis);
        kip_storage::history::prune_before(w, kip_storage::SpaceId::DEFAULT, before, PRUNE_MAX)?;
        Ok(())
    }

    /// Prunes records older than [`WINDOW`] in `w` when it is time to.
    pub(crate) fn maybe_prune(&self, w: &mut dyn GraphWrite) -> Result<(), KipError> {
        self.maybe_prune_history(w)?;
        {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|l| l.elapsed() < PRUNE_EVERY) {
                return Ok(());
            }
            *last = Some(Instant::now());
        }
        let before = millis(crate::time::now()).saturating_sub(WINDOW.as_millis() as u64);
        w.prune_request_records(before, PRUNE_MAX)?;
        Ok(())
    }
}
