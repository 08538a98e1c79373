//! The forwarding protocol's messages ([`Op`], [`Reply`], [`WireError`]) and how a
//! process that has the nexus open runs an [`Op`] ([`run`]): for its own callers and
//! for the requests forwarded to it, the same way.

use kip_engine::{Access, Budget, Nexus};
use kip_lang::{ErrorCode, KipError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A request sent to the owner of a directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// `execute_kip` (or `execute_kip_readonly` when `read_only`) with its arguments.
    Kip {
        /// The arguments object (`command`/`commands`, `parameters`, `dry_run`, ...).
        args: Value,
        /// Serve it as `execute_kip_readonly`.
        read_only: bool,
        /// Time budget in milliseconds (none: no deadline).
        timeout_ms: Option<u64>,
        /// The interface the call came through, recorded in the audit log (`None`: an
        /// internal read, not recorded).
        #[serde(default)]
        interface: Option<String>,
    },
    /// A Knowledge Graph Memory Server tool.
    Memory {
        /// The tool's name (`create_entities`, ...).
        tool: String,
        /// Its arguments object.
        args: Value,
        /// Refuse tools that write.
        read_only: bool,
        /// The interface the call came through (see `Op::Kip`).
        #[serde(default)]
        interface: Option<String>,
    },
    /// The number of concepts and propositions (`GET /health`).
    Totals,
    /// The memory's health report (`kip health`, `GET /memory/health`, the MCP resource).
    Health,
    /// One page of the audit log (`list_logs`, `kip logs`).
    ListLogs {
        /// The `next_cursor` of the previous page (none: the newest records).
        cursor: Option<String>,
        /// Records per page (1 to 100).
        limit: usize,
    },
    /// One deterministic sleep cycle (`kip sleep`).
    Sleep {
        /// List the writes instead of applying them.
        dry_run: bool,
        /// Why it runs (`on_demand`, `scheduled`, `threshold`).
        trigger: String,
        /// The language model of the judgement phases ([`crate::brain::Llm::to_wire`]),
        /// run by the owner before the deterministic phases, under the same cycle claim.
        #[serde(default)]
        llm: Option<Value>,
    },
}

/// The owner's answer to an [`Op`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// The result (an `execute_kip` response object, a tool result, `[concepts,
    /// propositions]`).
    Ok(Value),
    /// The call failed (an `execute_kip` response carries its errors inside `Ok`).
    Err(WireError),
}

/// A [`KipError`] on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireError {
    code: String,
    message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
}

impl From<&KipError> for WireError {
    fn from(e: &KipError) -> Self {
        WireError {
            code: e.code.as_str().to_string(),
            message: e.message.clone(),
            hint: e.hint.clone(),
        }
    }
}

impl From<WireError> for KipError {
    fn from(w: WireError) -> Self {
        let code = ErrorCode::from_code(&w.code).unwrap_or(ErrorCode::InternalError);
        let e = KipError::new(code, w.message);
        match w.hint {
            Some(h) => e.with_hint(h),
            None => e,
        }
    }
}

impl Reply {
    pub(super) fn into_result(self) -> Result<Value, KipError> {
        match self {
            Reply::Ok(v) => Ok(v),
            Reply::Err(w) => Err(w.into()),
        }
    }
}

pub(super) fn cancelled() -> Reply {
    fail(
        KipError::new(ErrorCode::ExecutionTimeout, "the request was cancelled")
            .with_hint("a write that had started was either committed whole or not at all: check with FIND before sending it again"),
    )
}

pub(super) fn fail(e: KipError) -> Reply {
    Reply::Err(WireError::from(&e))
}

/// Runs `op` on a nexus this process has open (its own requests and forwarded ones).
pub(super) fn run(nexus: &Nexus, op: &Op, budget: &Budget) -> Reply {
    match op {
        Op::Kip {
            args,
            read_only,
            interface,
            ..
        } => {
            let access = if *read_only {
                Access::ReadOnly
            } else {
                Access::ReadWrite
            };
            Reply::Ok(match interface {
                Some(i) => nexus.execute_audited(args, access, budget, i),
                None => nexus.execute_json_with(args, access, budget).to_json(),
            })
        }
        Op::Memory {
            tool,
            args,
            read_only,
            interface,
        } => {
            if *read_only && !kip_engine::memory::READ_ONLY_TOOLS.contains(&tool.as_str()) {
                return fail(
                    KipError::new(
                        ErrorCode::ImmutableTarget,
                        format!("'{tool}' writes, and this server is read-only"),
                    )
                    .with_hint("use the reading tools: read_graph, search_nodes, open_nodes"),
                );
            }
            let out = match interface {
                Some(i) => nexus.memory().call_audited(tool, args, i),
                None => nexus.memory().call(tool, args),
            };
            match out {
                Ok(v) => Reply::Ok(v),
                Err(e) => fail(e),
            }
        }
        Op::Totals => match nexus.admin().totals() {
            Ok((c, p)) => Reply::Ok(serde_json::json!([c, p])),
            Err(e) => fail(e),
        },
        Op::ListLogs { cursor, limit } => {
            match nexus.admin().audit().list(cursor.as_deref(), *limit) {
                Ok((records, next)) => {
                    Reply::Ok(serde_json::json!({"result": records, "next_cursor": next}))
                }
                Err(e) => fail(e),
            }
        }
        Op::Health => match nexus.brain().health() {
            Ok(h) => Reply::Ok(serde_json::to_value(h).unwrap_or(Value::Null)),
            Err(e) => fail(e),
        },
        Op::Sleep {
            dry_run,
            trigger,
            llm,
        } => {
            let llm = match llm.as_ref().map(crate::brain::Llm::from_wire).transpose() {
                Ok(l) => l,
                Err(e) => return fail(e),
            };
            match crate::brain::sleep_cycle(nexus, *dry_run, trigger, llm.as_ref()) {
                Ok(r) => Reply::Ok(serde_json::to_value(r).unwrap_or(Value::Null)),
                Err(e) => fail(e),
            }
        }
    }
}
