//! The HTTP server: MCP streamable HTTP at `/mcp`, the JSON API at `POST /kip`, and
//! `GET /health`, all on one port over one nexus.
//!
//! - `POST /kip` takes an `execute_kip` arguments object, or the
//!   `{"method": "execute_kip" | "execute_kip_readonly", "params": {...}}` body the KIP
//!   bridges and SDKs send (answered as JSON-RPC when it carries `jsonrpc`/`id`).
//! - With an API key every route requires `Authorization: Bearer <key>` (401 otherwise).
//! - `read_only` serves only the read-only tool; `/kip` then refuses UPSERT/DELETE.
//! - Request bodies are limited in size, `/kip` requests in time, and every request is
//!   logged through `tracing`.

use crate::mcp::{KipMcp, ToolSets};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use kip_engine::{Access, Nexus};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// HTTP server settings.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Bearer token every route requires, when set.
    pub api_key: Option<String>,
    /// Serve only read-only access.
    pub read_only: bool,
    /// MCP tool sets.
    pub tools: ToolSets,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Time budget of one `/kip` request.
    pub request_timeout: Duration,
    /// Check the `Host` header of MCP requests against loopback names (protection of a
    /// local server against DNS rebinding). `serve` turns it off when it binds a
    /// non-loopback address, where `--api-key` is the protection to use.
    pub loopback_hosts_only: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            api_key: None,
            read_only: false,
            tools: ToolSets::default(),
            max_body_bytes: 8 * 1024 * 1024,
            request_timeout: Duration::from_secs(60),
            loopback_hosts_only: true,
        }
    }
}

#[derive(Clone)]
struct AppState {
    nexus: Arc<Nexus>,
    config: Arc<HttpConfig>,
}

fn error_body(code: &str, message: impl Into<String>, hint: &str) -> Value {
    json!({"error": {"code": code, "message": message.into(), "hint": hint}})
}

async fn auth(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if let Some(key) = &state.config.api_key {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let ok = given.is_some_and(|g| constant_time_eq(g.as_bytes(), key.as_bytes()));
        if !ok {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                Json(error_body(
                    "KIP_3004",
                    "missing or wrong API key",
                    "send Authorization: Bearer <key>",
                )),
            )
                .into_response();
        }
    }
    next.run(req).await
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn health(State(state): State<AppState>) -> Response {
    let nexus = state.nexus.clone();
    match tokio::task::spawn_blocking(move || nexus.totals()).await {
        Ok(Ok((c, p))) => Json(json!({"status": "ok", "concepts": c, "propositions": p, "read_only": state.config.read_only})).into_response(),
        _ => (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "error"}))).into_response(),
    }
}

async fn kip(State(state): State<AppState>, body: Bytes) -> Response {
    let v: Value =
        match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => return (
                StatusCode::BAD_REQUEST,
                Json(error_body(
                    "KIP_1001",
                    format!("the request body is not valid JSON: {e}"),
                    "send an execute_kip arguments object, e.g. {\"command\": \"DESCRIBE PRIMER\"}",
                )),
            )
                .into_response(),
        };
    let rpc_id = v.get("id").cloned();
    let is_rpc = v.get("jsonrpc").is_some();
    let (args, mut access) = match v.get("method") {
        Some(Value::String(m)) if m == "execute_kip" => (
            v.get("params").cloned().unwrap_or(json!({})),
            Access::ReadWrite,
        ),
        Some(Value::String(m)) if m == "execute_kip_readonly" => (
            v.get("params").cloned().unwrap_or(json!({})),
            Access::ReadOnly,
        ),
        Some(other) => {
            let body = error_body(
                "KIP_1001",
                format!("unknown method {other}"),
                "use \"execute_kip\" or \"execute_kip_readonly\"",
            );
            return (StatusCode::BAD_REQUEST, Json(wrap(is_rpc, rpc_id, body))).into_response();
        }
        None => (v, Access::ReadWrite),
    };
    if state.config.read_only {
        access = Access::ReadOnly;
    }
    let nexus = state.nexus.clone();
    let work = tokio::task::spawn_blocking(move || nexus.execute_json(&args, access).to_json());
    let response = match tokio::time::timeout(state.config.request_timeout, work).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => error_body(
            "KIP_4003",
            format!("the request failed inside the server: {e}"),
            "retry; report the error if it persists",
        ),
        Err(_) => error_body(
            "KIP_4001",
            format!(
                "the request took longer than {:?}",
                state.config.request_timeout
            ),
            "optimize the query or lower LIMIT",
        ),
    };
    Json(wrap(is_rpc, rpc_id, response)).into_response()
}

fn wrap(is_rpc: bool, id: Option<Value>, response: Value) -> Value {
    if is_rpc {
        json!({"jsonrpc": "2.0", "id": id.unwrap_or(Value::Null), "result": response})
    } else {
        response
    }
}

/// The router: `/mcp`, `/kip`, `/health`, with auth, limits and request logs.
pub fn router(nexus: Arc<Nexus>, config: HttpConfig) -> Router {
    let mut tools = config.tools;
    tools.read_only |= config.read_only;
    let mcp_nexus = nexus.clone();
    let mut mcp_config =
        StreamableHttpServerConfig::default().with_max_request_body_bytes(config.max_body_bytes);
    if !config.loopback_hosts_only {
        mcp_config = mcp_config.disable_allowed_hosts();
    }
    let mcp = StreamableHttpService::new(
        move || Ok(KipMcp::new(mcp_nexus.clone(), tools)),
        Arc::new(LocalSessionManager::default()),
        mcp_config,
    );
    let state = AppState {
        nexus,
        config: Arc::new(config.clone()),
    };
    Router::new()
        .route("/health", get(health))
        .route("/kip", post(kip))
        .nest_service("/mcp", mcp)
        .layer(DefaultBodyLimit::max(config.max_body_bytes))
        .layer(middleware::from_fn_with_state(state.clone(), auth))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

/// Serves the router on `addr` until ctrl-c.
pub async fn serve(
    nexus: Arc<Nexus>,
    addr: SocketAddr,
    mut config: HttpConfig,
) -> std::io::Result<()> {
    if !addr.ip().is_loopback() {
        config.loopback_hosts_only = false;
        if config.api_key.is_none() {
            tracing::warn!(%addr, "serving on a non-loopback address without --api-key: anyone who can reach it can read and write the memory");
        }
    }
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "kip-nexus serving MCP at /mcp and the JSON API at /kip");
    serve_listener(nexus, listener, config).await
}

/// Serves on an already bound listener until ctrl-c.
pub async fn serve_listener(
    nexus: Arc<Nexus>,
    listener: tokio::net::TcpListener,
    config: HttpConfig,
) -> std::io::Result<()> {
    axum::serve(listener, router(nexus, config))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
}
