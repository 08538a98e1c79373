//! The audit log: one record per call made to the nexus through an interface
//! (`execute_kip`, `execute_kip_readonly`, a memory-server tool), kept in the store for
//! the human owner (`list_logs`, `kip logs`; docs/audit.md).
//!
//! Recording never waits for the disk: a call's record goes into a queue, and a
//! background thread appends the queue to the store in one transaction every
//! [`FLUSH_EVERY`] (or sooner when [`FLUSH_AT`] records wait), applying the retention
//! (the newest [`AuditConfig::max_entries`] records, and none older than
//! [`AuditConfig::max_age`] when set). Those transactions are not in the write-ahead
//! log: they become durable with the store's next checkpoint, and one every
//! [`DURABLE_EVERY`] is made durable on its own (a durable commit is a checkpoint, too
//! costly every second). Reading the log flushes the queue first, so a listing shows
//! every call made before it. A crash loses at most the records of the last
//! [`DURABLE_EVERY`]: the calls' own writes are durable either way.

use crate::store::backend::Backend;
use kip_lang::KipError;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime};

/// How often queued records are written.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// How often a write of queued records is made durable on its own (a checkpoint of the
/// store); the writes in between become durable with the store's next checkpoint.
pub const DURABLE_EVERY: Duration = Duration::from_secs(30);
/// Queued records that trigger a write at once.
pub const FLUSH_AT: usize = 10_000;
/// Longest command text kept in a record, in bytes (longer ones are cut with a note).
pub const MAX_TEXT: usize = 8 * 1024;
/// Most records one `list_logs` page returns.
pub const MAX_PAGE: usize = 100;
/// Most records held in memory while the store refuses them (a full disk): the oldest
/// are dropped beyond it, so a failing disk cannot grow the process without bound.
pub const MAX_QUEUED: usize = 100_000;
/// Most records one pass of dropping old parameters rewrites ([`AuditConfig::params_max_age`]).
pub const PARAMS_BATCH: usize = 10_000;

/// What [`Audit::scrub`] removes from a record: everything that may hold content.
const SCRUBBED: [&str; 6] = [
    "command",
    "commands",
    "parameters",
    "arguments",
    "request_clipped",
    "error",
];
/// Largest record kept, in bytes: a bigger one (a batch of a hundred long commands)
/// keeps its request cut to fit, with the request's size and CRC-32 digest.
pub const MAX_RECORD: usize = 64 * 1024;

/// What the log keeps.
#[derive(Debug, Clone, Copy)]
pub struct AuditConfig {
    /// Records kept at most (the oldest are dropped).
    pub max_entries: u64,
    /// Records older than this are dropped (`None`: no age limit).
    pub max_age: Option<Duration>,
    /// Bytes of records kept at most (the oldest are dropped; 0: no byte limit).
    pub max_bytes: u64,
    /// Records older than this lose their request's parameters and arguments (which
    /// may hold personal data or secrets the graph no longer holds); the command texts
    /// and outcomes stay. `None`: parameters are kept as long as their record.
    pub params_max_age: Option<Duration>,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            max_entries: 100_000,
            max_age: None,
            max_bytes: 256 << 20,
            params_max_age: Some(Duration::from_secs(30 * 86_400)),
        }
    }
}

impl AuditConfig {
    /// The default, changed by `KIP_AUDIT_MAX_ENTRIES` (a count; 0 keeps no log),
    /// `KIP_AUDIT_MAX_AGE` (a duration such as `30d`), `KIP_AUDIT_MAX_BYTES` (a size in
    /// bytes; 0: no byte limit) and `KIP_AUDIT_PARAMS_MAX_AGE` (a duration; `0` or
    /// `never` keeps parameters), so every process using a data directory applies the
    /// same retention when it is the one writing.
    pub fn from_env() -> AuditConfig {
        let mut c = AuditConfig::default();
        if let Ok(v) = std::env::var("KIP_AUDIT_PARAMS_MAX_AGE") {
            let v = v.trim();
            if v == "0" || v.eq_ignore_ascii_case("never") {
                c.params_max_age = None;
            } else if let Ok(d) = humantime::parse_duration(v) {
                c.params_max_age = Some(d);
            }
        }
        if let Some(n) = std::env::var("KIP_AUDIT_MAX_BYTES")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            c.max_bytes = n;
        }
        if let Some(n) = std::env::var("KIP_AUDIT_MAX_ENTRIES")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            c.max_entries = n;
        }
        if let Some(d) = std::env::var("KIP_AUDIT_MAX_AGE")
            .ok()
            .and_then(|v| humantime::parse_duration(v.trim()).ok())
        {
            c.max_age = Some(d);
        }
        c
    }
}

#[derive(Default)]
struct Queue {
    records: Vec<(u64, Vec<u8>)>,
    stop: bool,
}

/// The audit log of one nexus.
pub struct Audit {
    store: Arc<dyn Backend>,
    config: Mutex<AuditConfig>,
    next: AtomicU64,
    queue: Mutex<Queue>,
    wake: Condvar,
    /// Serializes flushes (the flusher thread and a listing).
    flushing: Mutex<()>,
    enabled: AtomicBool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// When records were last written durably.
    last_durable: Mutex<std::time::Instant>,
    /// Bytes of the records in the store's log as this process last counted them (an
    /// upper bound between exact counts: see [`Audit::byte_cut`]).
    bytes: AtomicU64,
    /// Records up to this number have had their old parameters dropped (see
    /// [`Audit::drop_old_parameters`]), and when that last ran.
    params_done: Mutex<(u64, Option<std::time::Instant>)>,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `s` cut to at most `max` bytes on a character boundary, with a note when cut.
pub fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... [{} bytes in all]", &s[..end], s.len())
}

impl Audit {
    /// Starts the log of `store` (its flusher thread). A backend that keeps no audit log
    /// gives a log that records nothing.
    pub fn start(store: Arc<dyn Backend>) -> Arc<Audit> {
        let mut last = 0u64;
        let mut bytes = 0u64;
        let _ = store.audit_range(0, u64::MAX, true, &mut |seq, b| {
            last = last.max(seq);
            bytes += b.len() as u64;
            Ok(true)
        });
        let audit = Arc::new(Audit {
            store,
            config: Mutex::new(AuditConfig::from_env()),
            next: AtomicU64::new(last + 1),
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            flushing: Mutex::new(()),
            enabled: AtomicBool::new(true),
            thread: Mutex::new(None),
            last_durable: Mutex::new(std::time::Instant::now()),
            bytes: AtomicU64::new(bytes),
            params_done: Mutex::new((0, None)),
        });
        let weak = Arc::downgrade(&audit);
        let handle = std::thread::Builder::new()
            .name("kip-audit".into())
            .spawn(move || loop {
                let Some(a) = weak.upgrade() else { return };
                {
                    let q = lock(&a.queue);
                    let (q, _) = a
                        .wake
                        .wait_timeout_while(q, FLUSH_EVERY, |q| {
                            !q.stop && q.records.len() < FLUSH_AT
                        })
                        .unwrap_or_else(|p| p.into_inner());
                    if q.stop {
                        drop(q);
                        let _ = a.flush_with(true);
                        return;
                    }
                }
                if let Err(e) = a.flush() {
                    tracing::warn!("audit log: cannot write: {}", e.message);
                }
            });
        if let Ok(h) = handle {
            *lock(&audit.thread) = Some(h);
        }
        audit
    }

    /// Stops recording (a `--read-only` server writes nothing, not even its log).
    pub fn disable(&self) {
        self.enabled.store(false, Ordering::Relaxed);
    }

    /// Sets what the log keeps (applied at the next write).
    pub fn configure(&self, config: AuditConfig) {
        *lock(&self.config) = config;
    }

    /// Records one call: `entry` is an object (interface, method, command, outcome,
    /// ...); the record gets its `id` and `timestamp` here.
    pub fn record(&self, mut entry: Value) {
        if !self.enabled.load(Ordering::Relaxed) || lock(&self.config).max_entries == 0 {
            return;
        }
        let seq = self.next.fetch_add(1, Ordering::SeqCst);
        if let Value::Object(m) = &mut entry {
            let mut full = serde_json::Map::new();
            full.insert("id".into(), json!(seq.to_string()));
            full.insert("timestamp".into(), json!(crate::time::now_text()));
            full.extend(std::mem::take(m));
            entry = Value::Object(full);
        }
        let bytes = bounded(entry).to_string().into_bytes();
        let mut q = lock(&self.queue);
        q.records.push((seq, bytes));
        if q.records.len() >= FLUSH_AT {
            self.wake.notify_one();
        }
    }

    /// Writes the queued records and applies the retention (durably when the last
    /// durable write is [`DURABLE_EVERY`] old).
    pub fn flush(&self) -> Result<(), KipError> {
        self.flush_with(false)
    }

    fn flush_with(&self, force_durable: bool) -> Result<(), KipError> {
        let _one = lock(&self.flushing);
        let records = std::mem::take(&mut lock(&self.queue).records);
        if records.is_empty() {
            return Ok(());
        }
        let config = *lock(&self.config);
        let mut keep = crate::store::backend::AuditKeep {
            newest: config.max_entries,
            from: 0,
        };
        if let Some(age) = config.max_age {
            let cutoff = crate::time::format(
                crate::time::now()
                    .checked_sub(age)
                    .unwrap_or(SystemTime::UNIX_EPOCH),
            );
            // The first record young enough: everything before it goes.
            let mut first_young = None;
            self.store
                .audit_range(0, u64::MAX, false, &mut |seq, bytes| {
                    let young = serde_json::from_slice::<Value>(bytes)
                        .ok()
                        .and_then(|v| v["timestamp"].as_str().map(|t| t >= cutoff.as_str()))
                        .unwrap_or(true);
                    if young {
                        first_young = Some(seq);
                    }
                    Ok(!young)
                })?;
            keep.from = first_young.unwrap_or(records.first().map_or(0, |r| r.0));
        }
        let (byte_cut, kept_bytes) = self.byte_cut(config.max_bytes, &records)?;
        keep.from = keep.from.max(byte_cut);
        let durable = force_durable || lock(&self.last_durable).elapsed() >= DURABLE_EVERY;
        match self.store.audit_append(&records, keep, durable) {
            Ok(()) => {
                if durable {
                    *lock(&self.last_durable) = std::time::Instant::now();
                }
                self.bytes.store(kept_bytes, Ordering::Relaxed);
                self.drop_old_parameters(config.params_max_age, force_durable)
            }
            Err(crate::store::StoreError::Other(m)) if m.contains("no audit log") => {
                self.enabled.store(false, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                // Put them back for the next try (the newest MAX_QUEUED at most).
                let mut q = lock(&self.queue);
                let later = std::mem::take(&mut q.records);
                q.records = records;
                q.records.extend(later);
                let excess = q.records.len().saturating_sub(MAX_QUEUED);
                if excess > 0 {
                    q.records.drain(..excess);
                }
                Err(e.into())
            }
        }
    }

    /// The byte limit: the lowest sequence number to keep so that the log, with
    /// `incoming` appended, stays within `max_bytes`, and the bytes it then holds (as
    /// far as this process counts: other processes sharing a PostgreSQL log append too,
    /// and the count and age limits drop more). Cheap while the running count is below
    /// the limit; past it the records are counted exactly, newest first (the incoming
    /// ones, then the stored ones), and the log is cut to 90% of the limit so the next
    /// flushes are cheap again.
    fn byte_cut(
        &self,
        max_bytes: u64,
        incoming: &[(u64, Vec<u8>)],
    ) -> Result<(u64, u64), KipError> {
        let new: u64 = incoming.iter().map(|r| r.1.len() as u64).sum();
        let now = self.bytes.load(Ordering::Relaxed).saturating_add(new);
        if max_bytes == 0 || now <= max_bytes {
            return Ok((0, now));
        }
        let target = max_bytes / 10 * 9;
        let mut kept = 0u64;
        for (seq, b) in incoming.iter().rev() {
            if kept + b.len() as u64 > target {
                return Ok((seq + 1, kept));
            }
            kept += b.len() as u64;
        }
        let mut cut = 0u64;
        self.store.audit_range(0, u64::MAX, true, &mut |seq, b| {
            if kept + b.len() as u64 > target {
                cut = seq + 1;
                return Ok(false);
            }
            kept += b.len() as u64;
            Ok(true)
        })?;
        Ok((cut, kept))
    }

    /// Writes the queue, then drops the parameters of the records older than the
    /// configured [`AuditConfig::params_max_age`] now (not waiting for the next pass).
    pub fn purge_old_parameters(&self) -> Result<(), KipError> {
        self.flush()?;
        let _one = lock(&self.flushing);
        let age = lock(&self.config).params_max_age;
        self.drop_old_parameters(age, true)
    }

    /// Strips the command texts, parameters and arguments of every record that holds
    /// one of `needles` (the content of elements a PURGE destroyed, Specification
    /// §60.3): the record keeps its id, time, interface, method and outcome and says
    /// `"scrubbed": "purge"`. Returns how many records it rewrote.
    pub fn scrub(&self, needles: &[String]) -> Result<u64, KipError> {
        if needles.is_empty() {
            return Ok(0);
        }
        self.flush()?;
        let _one = lock(&self.flushing);
        let mut rewrite = Vec::new();
        self.store
            .audit_range(0, u64::MAX, false, &mut |seq, bytes| {
                let text = String::from_utf8_lossy(bytes);
                if !needles.iter().any(|n| text.contains(n.as_str())) {
                    return Ok(true);
                }
                let Ok(Value::Object(mut rec)) = serde_json::from_slice::<Value>(bytes) else {
                    return Ok(true);
                };
                for key in SCRUBBED {
                    rec.remove(key);
                }
                rec.insert("scrubbed".into(), json!("purge"));
                rewrite.push((seq, Value::Object(rec).to_string().into_bytes()));
                Ok(true)
            })?;
        for chunk in rewrite.chunks(PARAMS_BATCH) {
            self.store.audit_rewrite(chunk)?;
        }
        Ok(rewrite.len() as u64)
    }

    /// Drops the parameters and arguments of the records older than `max_age` (once a
    /// minute at most, unless `now`; at most [`PARAMS_BATCH`] records a time): the
    /// record keeps its command texts and outcome and says `"parameters_dropped":
    /// true`.
    fn drop_old_parameters(&self, max_age: Option<Duration>, now: bool) -> Result<(), KipError> {
        let Some(age) = max_age else {
            return Ok(());
        };
        let from = {
            let mut done = lock(&self.params_done);
            if !now
                && done
                    .1
                    .is_some_and(|t| t.elapsed() < Duration::from_secs(60))
            {
                return Ok(());
            }
            done.1 = Some(std::time::Instant::now());
            done.0
        };
        let cutoff = crate::time::now()
            .checked_sub(age)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let mut rewrite = Vec::new();
        let mut last = from;
        self.store.audit_range(
            from.saturating_add(1),
            u64::MAX,
            false,
            &mut |seq, bytes| {
                let Ok(Value::Object(mut rec)) = serde_json::from_slice::<Value>(bytes) else {
                    last = seq;
                    return Ok(true);
                };
                let old = rec
                    .get("timestamp")
                    .and_then(Value::as_str)
                    .and_then(crate::time::parse)
                    .is_some_and(|t| t < cutoff);
                if !old || rewrite.len() >= PARAMS_BATCH {
                    return Ok(false);
                }
                last = seq;
                let mut dropped = false;
                for key in ["parameters", "arguments", "request_clipped"] {
                    dropped |= rec.remove(key).is_some();
                }
                if dropped {
                    rec.insert("parameters_dropped".into(), json!(true));
                    rewrite.push((seq, Value::Object(rec).to_string().into_bytes()));
                }
                Ok(true)
            },
        )?;
        if !rewrite.is_empty() {
            self.store.audit_rewrite(&rewrite)?;
        }
        lock(&self.params_done).0 = last;
        Ok(())
    }

    /// One page of the log, newest first: records before `cursor` (a record id from a
    /// previous page's `next_cursor`; `None`: the newest), at most `limit` (1 to
    /// [`MAX_PAGE`]). Returns the records and the cursor of the next page.
    pub fn list(
        &self,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Value>, Option<String>), KipError> {
        self.flush()?;
        let before = match cursor {
            None => u64::MAX,
            Some(c) => c.parse::<u64>().map_err(|_| {
                KipError::new(kip_lang::ErrorCode::InvalidSyntax, format!("invalid cursor {c:?}"))
                    .with_hint("pass the next_cursor of the previous page, or no cursor for the newest records")
            })?,
        };
        let limit = limit.clamp(1, MAX_PAGE);
        let mut out = Vec::new();
        let mut next = None;
        self.store.audit_range(0, before, true, &mut |seq, bytes| {
            if out.len() == limit {
                next = Some((seq + 1).to_string());
                return Ok(false);
            }
            out.push(serde_json::from_slice(bytes).unwrap_or(Value::Null));
            Ok(true)
        })?;
        Ok((out, next))
    }

    /// Flushes and stops the thread.
    pub fn shutdown(&self) {
        lock(&self.queue).stop = true;
        self.wake.notify_all();
        if let Some(h) = lock(&self.thread).take() {
            let _ = h.join();
        }
        let _ = self.flush_with(true);
    }
}

/// `entry` within [`MAX_RECORD`] bytes: a record over it keeps everything but its
/// request (`command`, `commands`, `parameters`, `arguments`), which is replaced by
/// `request_clipped` (the request's JSON cut to fit), `request_bytes` (its whole size)
/// and `request_crc32` (the CRC-32 of its whole JSON, to tell two requests apart).
fn bounded(mut entry: Value) -> Value {
    let size = entry.to_string().len();
    if size <= MAX_RECORD {
        return entry;
    }
    let Value::Object(m) = &mut entry else {
        return entry;
    };
    let mut request = serde_json::Map::new();
    for key in ["command", "commands", "parameters", "arguments"] {
        if let Some(v) = m.remove(key) {
            request.insert(key.into(), v);
        }
    }
    let text = Value::Object(request).to_string();
    let room = MAX_RECORD.saturating_sub(size.saturating_sub(text.len()) + 256);
    m.insert("request_clipped".into(), json!(clip(&text, room / 2)));
    m.insert("request_bytes".into(), json!(text.len()));
    m.insert(
        "request_crc32".into(),
        json!(format!("{:08x}", crc32fast::hash(text.as_bytes()))),
    );
    entry
}

/// The record of one `execute_kip` call: its interface (`mcp`, `http`, `cli`,
/// `sleep`, ...), method, command text(s) (each cut at [`MAX_TEXT`] bytes), parameters
/// (cut likewise), `dry_run`, outcome (`ok`, or `error` with the first error code),
/// commands run and failed, and duration.
pub fn kip_entry(
    interface: &str,
    method: &str,
    args: &Value,
    response: &Value,
    duration: Duration,
) -> Value {
    let mut e = serde_json::Map::new();
    e.insert("interface".into(), json!(interface));
    e.insert("method".into(), json!(method));
    if let Some(c) = args.get("command").and_then(Value::as_str) {
        e.insert("command".into(), json!(clip(c, MAX_TEXT)));
    }
    // `commands` of a 1.x batch, `operations` of a KIP 2.0 request.
    if let Some(cs) = args
        .get("commands")
        .or_else(|| args.get("operations"))
        .and_then(Value::as_array)
    {
        let texts: Vec<Value> = cs
            .iter()
            .take(100)
            .map(|c| {
                let t = c
                    .as_str()
                    .or_else(|| c.get("command").and_then(Value::as_str))
                    .unwrap_or_default();
                json!(clip(t, MAX_TEXT))
            })
            .collect();
        e.insert("commands".into(), Value::Array(texts));
    }
    if let Some(p) = args.get("parameters").filter(|p| !p.is_null()) {
        let text = p.to_string();
        e.insert(
            "parameters".into(),
            if text.len() <= MAX_TEXT / 2 {
                p.clone()
            } else {
                json!(clip(&text, MAX_TEXT / 2))
            },
        );
    }
    e.insert(
        "dry_run".into(),
        json!(args
            .get("dry_run")
            .and_then(Value::as_bool)
            .unwrap_or(false)),
    );
    // Outcomes: one object, a batch `{"result": [outcome, ...]}`, or a KIP 2.0 envelope
    // (a top-level error, else one result per operation).
    let outcomes: Vec<&Value> = match (response.get("kip"), response.get("result")) {
        (Some(_), _) => match response.get("results").and_then(Value::as_array) {
            Some(items) if response.get("error").is_none() => items.iter().collect(),
            _ => vec![response],
        },
        (None, Some(Value::Array(items))) if args.get("commands").is_some() => {
            items.iter().collect()
        }
        _ => vec![response],
    };
    let failed: Vec<&Value> = outcomes.iter().filter_map(|o| o.get("error")).collect();
    e.insert(
        "outcome".into(),
        json!(if failed.is_empty() { "ok" } else { "error" }),
    );
    if let Some(code) = failed.first().and_then(|f| f.get("code")) {
        e.insert("error_code".into(), code.clone());
    }
    e.insert("commands_run".into(), json!(outcomes.len()));
    e.insert("errors".into(), json!(failed.len()));
    e.insert(
        "duration_ms".into(),
        json!((duration.as_secs_f64() * 1e6).round() / 1e3),
    );
    Value::Object(e)
}

/// The record of one memory-server tool call (`create_entities`, ...).
pub fn tool_entry(
    interface: &str,
    tool: &str,
    args: &Value,
    outcome: Result<&Value, &KipError>,
    duration: Duration,
) -> Value {
    let text = args.to_string();
    let mut e = json!({
        "interface": interface,
        "method": tool,
        "arguments": if text.len() <= MAX_TEXT { args.clone() } else { json!(clip(&text, MAX_TEXT)) },
        "dry_run": false,
        "outcome": if outcome.is_ok() { "ok" } else { "error" },
        "commands_run": 1,
        "errors": u8::from(outcome.is_err()),
        "duration_ms": (duration.as_secs_f64() * 1e6).round() / 1e3,
    });
    if let Err(err) = outcome {
        e["error_code"] = json!(err.code.as_str());
        e["error"] = json!(clip(&err.message, 1024));
    }
    e
}

#[cfg(test)]
mod kip2_entry_tests {
    use super::*;

    #[test]
    fn a_kip2_request_is_recorded_with_its_operations_and_their_errors() {
        let args = json!({"kip": "2.0", "execution": {"mode": "sequence"}, "operations": [
            {"command": "DESCRIBE PROTOCOL"}, {"command": "FIND(?x) WHERE {"}
        ]});
        let response = json!({"kip": "2.0", "status": "partial", "results": [
            {"status": "succeeded", "result": {}},
            {"status": "failed", "error": {"code": "InvalidSyntax", "category": "syntax", "message": "m"}}
        ]});
        let e = kip_entry(
            "http",
            "execute_kip",
            &args,
            &response,
            Duration::from_millis(1),
        );
        assert_eq!(
            e["commands"],
            json!(["DESCRIBE PROTOCOL", "FIND(?x) WHERE {"])
        );
        assert_eq!(
            (
                &e["outcome"],
                &e["error_code"],
                &e["commands_run"],
                &e["errors"]
            ),
            (
                &json!("error"),
                &json!("InvalidSyntax"),
                &json!(2),
                &json!(1)
            )
        );
        let refused = json!({"kip": "2.0", "status": "failed", "results": [],
            "error": {"code": "InvalidRequestEnvelope", "category": "protocol", "message": "m"}});
        let e = kip_entry(
            "http",
            "execute_kip",
            &args,
            &refused,
            Duration::from_millis(1),
        );
        assert_eq!(e["error_code"], "InvalidRequestEnvelope");
    }
}
