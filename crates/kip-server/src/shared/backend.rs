//! [`Backend`]: what the interfaces call the engine through, whether this process has
//! the nexus open or forwards to the process that does.

use super::protocol::{run, Op, Reply};
use super::SharedNexus;
use kip_engine::{Access, Budget, Nexus};
use kip_lang::KipError;
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

/// What a server runs its engine calls on: a nexus this process has open, or a data
/// directory shared with other processes ([`SharedNexus`]). Every call blocks: run it
/// on the blocking pool.
#[derive(Clone)]
pub enum Backend {
    /// A nexus of this process alone (tests, embedding).
    Local(Arc<Nexus>),
    /// A data directory this process owns or forwards to.
    Shared(Arc<SharedNexus>),
}

impl From<Arc<Nexus>> for Backend {
    fn from(n: Arc<Nexus>) -> Self {
        Backend::Local(n)
    }
}

impl From<Arc<SharedNexus>> for Backend {
    fn from(s: Arc<SharedNexus>) -> Self {
        Backend::Shared(s)
    }
}

impl Backend {
    fn call(&self, op: &Op, budget: &Budget) -> Reply {
        match self {
            Backend::Local(n) => run(n, op, budget),
            Backend::Shared(s) => s.call(op, budget),
        }
    }

    /// Runs an `execute_kip` request (its arguments object) within `budget` and returns
    /// the response object. Not recorded in the audit log: for the server's own reads;
    /// calls made for a client go through [`Backend::execute_json_as`].
    pub fn execute_json(&self, args: Value, access: Access, budget: &Budget) -> Value {
        self.execute(args, access, budget, None)
    }

    /// [`Backend::execute_json`] for a client's call through `interface` (`mcp`,
    /// `http`, `cli`, `brain`), recorded in the audit log.
    pub fn execute_json_as(
        &self,
        args: Value,
        access: Access,
        budget: &Budget,
        interface: &str,
    ) -> Value {
        self.execute(args, access, budget, Some(interface.to_string()))
    }

    fn execute(
        &self,
        args: Value,
        access: Access,
        budget: &Budget,
        interface: Option<String>,
    ) -> Value {
        let timeout_ms = budget.deadline.map(|d| {
            u64::try_from(d.saturating_duration_since(Instant::now()).as_millis())
                .unwrap_or(u64::MAX)
        });
        let op = Op::Kip {
            args,
            read_only: access == Access::ReadOnly,
            timeout_ms,
            interface,
        };
        match self.call(&op, budget) {
            Reply::Ok(v) => v,
            Reply::Err(w) => serde_json::json!({"error": KipError::from(w).to_json()}),
        }
    }

    /// Runs a memory-server tool; `read_only` refuses the tools that write. Not recorded
    /// in the audit log (see [`Backend::memory_tool_as`]).
    pub fn memory_tool(&self, tool: &str, args: Value, read_only: bool) -> Result<Value, KipError> {
        self.memory(tool, args, read_only, None)
    }

    /// [`Backend::memory_tool`] for a client's call through `interface`, recorded in
    /// the audit log.
    pub fn memory_tool_as(
        &self,
        tool: &str,
        args: Value,
        read_only: bool,
        interface: &str,
    ) -> Result<Value, KipError> {
        self.memory(tool, args, read_only, Some(interface.to_string()))
    }

    fn memory(
        &self,
        tool: &str,
        args: Value,
        read_only: bool,
        interface: Option<String>,
    ) -> Result<Value, KipError> {
        let op = Op::Memory {
            tool: tool.to_string(),
            args,
            read_only,
            interface,
        };
        self.call(&op, &Budget::default()).into_result()
    }

    /// The number of concepts and propositions.
    pub fn totals(&self) -> Result<(u64, u64), KipError> {
        let v = self.call(&Op::Totals, &Budget::default()).into_result()?;
        match (v[0].as_u64(), v[1].as_u64()) {
            (Some(c), Some(p)) => Ok((c, p)),
            _ => Err(KipError::internal(format!(
                "the owning process answered the totals with {v}"
            ))),
        }
    }

    /// The storage, for `GET /health`: `{"kind", "location"}` of this process's own
    /// nexus, or `{"kind": "forwarded"}` when another process owns the directory.
    pub fn storage(&self) -> Value {
        match self.local() {
            Some(n) => serde_json::json!({
                "kind": n.admin().backend().kind(),
                "location": n.admin().backend().location(),
            }),
            None => serde_json::json!({"kind": "forwarded"}),
        }
    }

    /// One page of the audit log, newest first: `{"result": [record, ...],
    /// "next_cursor": "..." | null}` (see [`kip_engine::audit`]).
    pub fn list_logs(&self, cursor: Option<String>, limit: usize) -> Result<Value, KipError> {
        self.call(&Op::ListLogs { cursor, limit }, &Budget::default())
            .into_result()
    }

    /// The memory's health report as JSON ([`kip_engine::brain::Health`]).
    pub fn health(&self) -> Result<Value, KipError> {
        self.call(&Op::Health, &Budget::default()).into_result()
    }

    /// Runs one sleep cycle where the nexus is open (the language-model phases first
    /// when `llm` is given, see [`crate::brain::sleep_cycle`]); its report as JSON
    /// ([`kip_engine::brain::SleepReport`]).
    pub fn sleep(
        &self,
        dry_run: bool,
        trigger: &str,
        llm: Option<&crate::brain::Llm>,
    ) -> Result<Value, KipError> {
        let op = Op::Sleep {
            dry_run,
            trigger: trigger.to_string(),
            llm: llm.map(crate::brain::Llm::to_wire),
        };
        self.call(&op, &Budget::default()).into_result()
    }

    /// The nexus, when this process has it open.
    pub fn local(&self) -> Option<Arc<Nexus>> {
        match self {
            Backend::Local(n) => Some(n.clone()),
            Backend::Shared(s) => s.local(),
        }
    }
}
