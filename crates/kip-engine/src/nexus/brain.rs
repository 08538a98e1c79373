//! The nexus's own maintenance and record keeping: the audit log of the calls made
//! through the interfaces (`crate::audit`), the health report and the sleep cycle
//! (`crate::brain`), with the claim that keeps two cycles from overlapping.

use super::*;

/// A claim on a nexus's sleep cycle ([`Nexus::begin_sleep`]): no other cycle starts
/// while it lives.
pub struct SleepGuard<'a>(#[allow(dead_code)] MutexGuard<'a, ()>);

impl Nexus {
    /// [`Nexus::execute_json_with`], recorded in the audit log as a call through
    /// `interface` (`method` is `execute_kip` or `execute_kip_readonly`).
    pub fn execute_audited(
        &self,
        args: &Value,
        access: Access,
        budget: &Budget,
        interface: &str,
    ) -> Value {
        let start = std::time::Instant::now();
        let response = self.execute_json_with(args, access, budget).to_json();
        let method = if access == Access::ReadOnly {
            "execute_kip_readonly"
        } else {
            "execute_kip"
        };
        self.audit.record(crate::audit::kip_entry(
            interface,
            method,
            args,
            &response,
            start.elapsed(),
        ));
        response
    }

    /// [`Nexus::memory_tool`], recorded in the audit log as a call through `interface`.
    pub fn memory_tool_audited(
        &self,
        tool: &str,
        args: &Value,
        interface: &str,
    ) -> Result<Value, KipError> {
        let start = std::time::Instant::now();
        let out = self.memory_tool(tool, args);
        self.audit.record(crate::audit::tool_entry(
            interface,
            tool,
            args,
            out.as_ref(),
            start.elapsed(),
        ));
        out
    }

    /// The audit log (see [`crate::audit`]): interfaces record each call in it.
    pub fn audit(&self) -> &Arc<crate::audit::Audit> {
        &self.audit
    }

    /// The health report of the memory as of now (see [`crate::brain::health()`]).
    pub fn health(&self) -> Result<crate::brain::Health, KipError> {
        let now = crate::time::now();
        self.read(|r| crate::brain::health(r, now))
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
    /// more phases than [`Nexus::sleep`] runs (the language-model ones); `KIP_4002`
    /// while another cycle holds it.
    pub fn begin_sleep(&self) -> Result<SleepGuard<'_>, KipError> {
        match self.sleeping.try_lock() {
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
        let r = self.write(|w| delete_if_still_eligible(w, p, now), false);
        if matches!(r, Ok(Reclaimed::Deleted { .. })) {
            self.wrote.store(true, std::sync::atomic::Ordering::Relaxed);
            if let Some(s) = &self.semantic {
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
        self.audit.record(crate::audit::kip_entry(
            "sleep",
            "reclaim",
            &serde_json::json!({"command": "DELETE (checked in its transaction)", "parameters": {"id": p.id, "with_links": p.with_links}}),
            &response,
            start.elapsed(),
        ));
        r
    }

    /// [`Nexus::sleep`] under a claim from [`Nexus::begin_sleep`].
    pub fn sleep_held(
        &self,
        _cycle: &SleepGuard<'_>,
        opts: &crate::brain::SleepOptions,
    ) -> Result<crate::brain::SleepReport, KipError> {
        crate::brain::sleep::run(self, opts)
    }
}
