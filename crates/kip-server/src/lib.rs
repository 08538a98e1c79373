//! # kip-server
//!
//! The interfaces of kip-nexus over one shared [`kip_engine::Nexus`]:
//! - [`mcp`]: the MCP server (tools, resources, prompt) for stdio and streamable HTTP.
//! - [`http`]: the HTTP server: MCP at `/mcp`, the JSON API at `POST /kip`, `GET /health`,
//!   with optional bearer-token auth, body size limit, timeouts and request logs.
//!
//! Architecture invariant: async lives here and only here; engine calls run on the
//! blocking pool.

pub mod brain;
pub mod docs;
pub mod explorer;
pub mod http;
pub mod mcp;
#[cfg(unix)]
pub mod shared;
#[cfg(unix)]
pub mod sleeper;
#[cfg(unix)]
pub use shared::{Backend, SharedNexus};

use kip_engine::Access;
use rmcp::ServiceExt;
use serde_json::Value;
use std::time::Duration;

/// Time budget of a request when the server is not told otherwise (`--timeout-secs`).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Serves MCP over stdin/stdout until the client disconnects.
pub async fn serve_stdio(
    nexus: impl Into<Backend>,
    tools: mcp::ToolSets,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    serve_stdio_with(nexus, tools, DEFAULT_REQUEST_TIMEOUT).await
}

/// [`serve_stdio`] with a time budget per tool call.
pub async fn serve_stdio_with(
    nexus: impl Into<Backend>,
    tools: mcp::ToolSets,
    request_timeout: Duration,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    serve_stdio_full(nexus, tools, request_timeout, None).await
}

/// [`serve_stdio_with`] with the language model behind `remember` / `recall_memory`.
pub async fn serve_stdio_full(
    nexus: impl Into<Backend>,
    tools: mcp::ToolSets,
    request_timeout: Duration,
    llm: Option<std::sync::Arc<brain::Llm>>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let service = mcp::KipMcp::new(nexus, tools)
        .with_timeout(request_timeout)
        .with_llm(llm)
        .serve(rmcp::transport::stdio())
        .await?;
    service.waiting().await?;
    Ok(())
}

/// Cancels a request's engine work when dropped unless disarmed: a client that goes
/// away (its connection closed, the handler's future dropped) stops the work too.
pub(crate) struct CancelOnDrop(Option<kip_engine::Interrupt>);

impl CancelOnDrop {
    pub(crate) fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(i) = self.0.take() {
            i.cancel();
        }
    }
}

/// Runs an `execute_kip` request (arguments object) on the blocking pool within
/// `timeout`, for every interface (HTTP `/kip`, MCP tools). The engine
/// stops at the deadline by itself (cooperative cancellation), and the answer always
/// waits for the work to end, so it says exactly what was applied: a write is never
/// reported as failed and then committed.
pub async fn run_budgeted(
    backend: Backend,
    args: Value,
    access: Access,
    timeout: Duration,
    interface: &'static str,
) -> Value {
    let budget = kip_engine::Budget::with_timeout(timeout);
    let guard = CancelOnDrop(budget.interrupt.clone());
    let interrupt = budget.interrupt.clone();
    let mut work = tokio::task::spawn_blocking(move || {
        backend.execute_json_as(args, access, &budget, interface)
    });
    // Past the deadline (plus a grace period for a check to come round), raise the
    // flag in case some step has not looked at the clock; keep waiting for the truth.
    let result = match tokio::time::timeout(timeout + Duration::from_secs(1), &mut work).await {
        Ok(r) => r,
        Err(_) => {
            if let Some(i) = &interrupt {
                i.cancel();
            }
            work.await
        }
    };
    guard.disarm();
    match result {
        Ok(v) => v,
        Err(e) => {
            serde_json::json!({"error": {"code": "KIP_4003", "message": format!("the request failed inside the server: {e}"), "hint": "retry; report the error if it persists"}})
        }
    }
}

/// The `{cursor, limit}` parameters of `list_logs` (limit 1 to 100, default 10).
pub fn list_logs_args(params: &Value) -> Result<(Option<String>, usize), kip_lang::KipError> {
    let bad = |m: &str| {
        kip_lang::KipError::new(kip_lang::ErrorCode::InvalidSyntax, m.to_string()).with_hint(
            "list_logs takes {\"cursor\": the previous page's next_cursor, \"limit\": 1 to 100}",
        )
    };
    let cursor = match params.get("cursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(bad("cursor must be a string")),
    };
    let limit = match params.get("limit") {
        None | Some(Value::Null) => 10,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=100).contains(&n) => n as usize,
            _ => return Err(bad("limit must be an integer from 1 to 100")),
        },
    };
    Ok((cursor, limit))
}
