//! Sleep cycles in the background of a server (`kip serve --sleep-every DURATION`):
//! scheduled cycles, and the threshold triggers of SystemInstructions.md (Unsorted
//! backlog > 20, orphans > 10, stale Events > 30) checked between them. Cycles run on
//! their own thread through the [`Backend`] (forwarded to the owning process when this
//! one only forwards), never block agents' requests (each write is one short
//! statement), and never overlap: the nexus refuses a second cycle while one runs.

use crate::Backend;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// When cycles run.
#[derive(Debug, Clone, Copy)]
pub struct SleepSchedule {
    /// A scheduled cycle runs once this much time has passed since the last cycle (as
    /// recorded in `$system.attributes.last_sleep_cycle`, so a restart does not reset
    /// it).
    pub every: Duration,
    /// How often the thread looks at the clock and, when a threshold check is allowed,
    /// at the health report.
    pub check: Duration,
    /// A threshold-triggered cycle runs at most this often (the deterministic phases
    /// cannot classify orphans, so without it an unresolvable threshold would run a
    /// cycle at every check).
    pub threshold_gap: Duration,
}

impl SleepSchedule {
    /// Cycles every `every`, thresholds checked every `min(every, 15 min)`, a threshold
    /// cycle at most hourly (or every `every`, when shorter).
    pub fn every(every: Duration) -> SleepSchedule {
        SleepSchedule {
            every,
            check: every.min(Duration::from_secs(15 * 60)),
            threshold_gap: every.min(Duration::from_secs(3600)),
        }
    }
}

/// Which cycle is due, if any: `scheduled` when `every` has passed since `last` (or
/// there was none), else `threshold` when a trigger fires and `threshold_gap` has
/// passed.
pub fn due(
    now: SystemTime,
    last: Option<SystemTime>,
    s: &SleepSchedule,
    triggers_fire: impl FnOnce() -> bool,
) -> Option<&'static str> {
    let since = last.map(|l| now.duration_since(l).unwrap_or(Duration::ZERO));
    match since {
        None => Some("scheduled"),
        Some(d) if d >= s.every => Some("scheduled"),
        Some(d) if d >= s.threshold_gap && triggers_fire() => Some("threshold"),
        _ => None,
    }
}

/// The language model of the judgement phases and the bounds of its loop.
pub use crate::brain::Llm as LlmPhases;

/// Runs one sleep cycle through `backend` (where the nexus is open): the
/// language-model phases first when `llm` is given (Phases 2-6 and 8, kip-brain's
/// bounded `$system` loop), then the deterministic ones (decay, TTL reclamation,
/// finalization), whose maintenance-log entry lists the loop's KML statements; all of
/// it under the nexus's cycle claim. Returns the cycle's report.
pub fn run_cycle(
    backend: &Backend,
    dry_run: bool,
    trigger: &str,
    llm: Option<&crate::brain::Llm>,
) -> Result<Value, kip_lang::KipError> {
    backend.sleep(dry_run, trigger, llm)
}

/// The background thread running the cycles.
pub struct Sleeper {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

fn last_cycle(backend: &Backend) -> Option<SystemTime> {
    let r = backend.execute_json(
        json!({"command": "FIND(?s.attributes.last_sleep_cycle) WHERE { ?s {type: \"Person\", name: \"$system\"} }"}),
        kip_engine::Access::ReadOnly,
        &kip_engine::Budget::default(),
    );
    r["result"]
        .as_array()
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .and_then(kip_engine::brain::time::parse)
}

impl Sleeper {
    /// Starts the thread (with the language-model phases in each cycle when `llm` is
    /// given).
    pub fn start(
        backend: Backend,
        schedule: SleepSchedule,
        llm: Option<std::sync::Arc<crate::brain::Llm>>,
    ) -> std::io::Result<Sleeper> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("kip-sleep".into())
            .spawn(move || {
                let mut last = last_cycle(&backend);
                loop {
                    // Wait for the next check in short steps, so a stop is quick.
                    let wake = std::time::Instant::now() + schedule.check;
                    while std::time::Instant::now() < wake {
                        if flag.load(Ordering::SeqCst) {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(50).min(schedule.check));
                    }
                    let now = SystemTime::now();
                    let trigger = due(now, last, &schedule, || match backend.health() {
                        Ok(h) => h["triggers"].as_array().is_some_and(|t| !t.is_empty()),
                        Err(e) => {
                            tracing::warn!("sleep: the health report failed: {}", e.message);
                            false
                        }
                    });
                    let Some(trigger) = trigger else { continue };
                    match run_cycle(&backend, false, trigger, llm.as_deref()) {
                        Ok(r) => {
                            tracing::info!(
                                trigger,
                                decayed = r["decayed_links"].as_u64().unwrap_or(0),
                                deleted = r["deleted_concepts"].as_array().map_or(0, Vec::len),
                                "sleep cycle done"
                            );
                            last = Some(now);
                        }
                        Err(e) => {
                            tracing::warn!("sleep cycle ({trigger}) failed: {}", e.message);
                            // Not again at the very next check.
                            last = Some(now);
                        }
                    }
                }
            })?;
        Ok(Sleeper {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops the thread, waiting for a cycle under way to finish.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_cycles() {
        let s = SleepSchedule::every(Duration::from_secs(12 * 3600));
        assert_eq!(s.check, Duration::from_secs(900));
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let after = |secs| Some(t0 + Duration::from_secs(secs));
        assert_eq!(due(t0, None, &s, || false), Some("scheduled"));
        assert_eq!(
            due(after(12 * 3600).unwrap_or(t0), Some(t0), &s, || false),
            Some("scheduled")
        );
        assert_eq!(
            due(after(600).unwrap_or(t0), Some(t0), &s, || true),
            None,
            "too soon"
        );
        assert_eq!(
            due(after(3600).unwrap_or(t0), Some(t0), &s, || true),
            Some("threshold")
        );
        assert_eq!(due(after(3600).unwrap_or(t0), Some(t0), &s, || false), None);
        // A clock that went back counts as no time passed.
        assert_eq!(due(t0, after(60), &s, || true), None);
    }
}
