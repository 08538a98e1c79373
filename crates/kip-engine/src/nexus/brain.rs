//! The brain handle ([`Brain`], from [`Nexus::brain`]): the deterministic upkeep of
//! the memory itself (the rules are [`crate::brain`]): the health report and the sleep
//! cycle, with the claim that keeps two cycles on one nexus from overlapping. The
//! language-model phases (kip-brain) run between [`Brain::begin_sleep`] and
//! [`Brain::sleep_held`] under that claim.

use super::Nexus;
use kip_lang::{ErrorCode, KipError};
use std::sync::MutexGuard;

/// A claim on a nexus's sleep cycle ([`Brain::begin_sleep`]): no other cycle starts
/// while it lives.
pub struct SleepGuard<'a>(#[allow(dead_code)] MutexGuard<'a, ()>);

/// The health report and the sleep cycle of a nexus; see the module docs. Borrowed from
/// the nexus ([`Nexus::brain`]) and as cheap to make as a reference.
#[derive(Clone, Copy, Debug)]
pub struct Brain<'a> {
    pub(super) nexus: &'a Nexus,
}

impl<'a> Brain<'a> {
    /// The health report of the memory as of now (see [`crate::brain::health()`]).
    pub fn health(&self) -> Result<crate::brain::Health, KipError> {
        let now = crate::time::now();
        self.nexus.read(|r| crate::brain::health(r, now))
    }

    /// Runs one deterministic sleep cycle (see [`crate::brain::sleep`]). Refuses with
    /// `KIP_4002` while another cycle runs on this nexus.
    pub fn sleep(
        &self,
        opts: &crate::brain::SleepOptions,
    ) -> Result<crate::brain::SleepReport, KipError> {
        let cycle = self.begin_sleep()?;
        self.sleep_held(&cycle, opts)
    }

    /// Claims this nexus's sleep cycle (held until the guard drops), for a cycle with
    /// more phases than [`Brain::sleep`] runs (the language-model ones); `KIP_4002`
    /// while another cycle holds it.
    pub fn begin_sleep(&self) -> Result<SleepGuard<'a>, KipError> {
        match self.nexus.sleeping.try_lock() {
            Ok(g) => Ok(SleepGuard(g)),
            Err(std::sync::TryLockError::Poisoned(p)) => Ok(SleepGuard(p.into_inner())),
            Err(std::sync::TryLockError::WouldBlock) => Err(KipError::new(
                ErrorCode::ResourceExhausted,
                "a sleep cycle is already running on this nexus",
            )
            .with_hint("wait for it to finish; its report lands in $system's maintenance_log")),
        }
    }

    /// Deletes what `p` plans if it is still eligible as of `now`, checked in the
    /// deleting transaction ([`crate::brain::reclaim`]); recorded in the audit log as
    /// the sleep cycle's work.
    pub(crate) fn reclaim(
        &self,
        p: &crate::brain::reclaim::Planned,
        now: std::time::SystemTime,
    ) -> Result<crate::brain::reclaim::Reclaimed, KipError> {
        use crate::brain::reclaim::{delete_if_still_eligible, Reclaimed};
        let start = std::time::Instant::now();
        let r = self
            .nexus
            .write(|w| delete_if_still_eligible(w, p, now), false);
        if matches!(r, Ok(Reclaimed::Deleted { .. })) {
            self.nexus
                .wrote
                .store(true, std::sync::atomic::Ordering::Relaxed);
            if let Some(s) = &self.nexus.semantic {
                s.nudge();
            }
        }
        let response = match &r {
            Ok(Reclaimed::Deleted {
                concepts,
                propositions,
            }) => {
                serde_json::json!({"result": {"deleted_concepts": concepts, "deleted_propositions": propositions}})
            }
            Ok(Reclaimed::Skipped(reason)) => serde_json::json!({"result": {"skipped": reason}}),
            Err(e) => serde_json::json!({"error": e}),
        };
        self.nexus.audit.record(crate::audit::kip_entry(
            "sleep",
            "reclaim",
            &serde_json::json!({"command": "DELETE (checked in its transaction)", "parameters": {"id": p.id, "with_links": p.with_links}}),
            &response,
            start.elapsed(),
        ));
        r
    }

    /// [`Brain::sleep`] under a claim from [`Brain::begin_sleep`].
    pub fn sleep_held(
        &self,
        _cycle: &SleepGuard<'_>,
        opts: &crate::brain::SleepOptions,
    ) -> Result<crate::brain::SleepReport, KipError> {
        crate::brain::sleep::run(self.nexus, opts)
    }
}
