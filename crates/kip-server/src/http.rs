//! The HTTP server: MCP streamable HTTP at `/mcp`, the JSON API at `POST /kip`, and
//! `GET /health`, all on one port over one nexus.
//!
//! - `POST /kip` takes an `execute_kip` arguments object, or the
//!   `{"method": "execute_kip" | "execute_kip_readonly", "params": {...}}` body the KIP
//!   bridges and SDKs send (answered as JSON-RPC when it carries `jsonrpc`/`id`).
//! - With an API key every route requires `Authorization: Bearer <key>` (401 otherwise).
//! - `read_only` serves only the read-only tool; `/kip` then refuses UPSERT/DELETE.
//! - Browsers cannot be used against it: a loopback server answers only requests whose
//!   `Host` is a loopback name (DNS rebinding), a request with an `Origin` other than
//!   the server's own or one allowed by `--allow-origin` is refused (403) on every route,
//!   CORS preflights are answered only for allowed origins, and `POST /kip` requires
//!   `Content-Type: application/json` (a cross-site form or `text/plain` POST is a
//!   "simple request" browsers send without asking).
//! - Connections are limited in number, request headers and bodies in read time,
//!   bodies in size, `/kip` requests in time (the engine stops the work when the time
//!   is up: cooperative cancellation), and every request is logged through `tracing`.
//! - Every error answer has a JSON body `{"error": {"code", "message", "hint"}}`.
//!
//! The limits, their defaults and the threat model are in `docs/security.md`.

use crate::mcp::{KipMcp, ToolSets};
use crate::Backend;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use kip_engine::Access;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{json, Value};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// Time budget of one `/kip` request or MCP tool call: the engine stops the work
    /// when it runs out (commands not started are not run).
    pub request_timeout: Duration,
    /// Check the `Host` header of every request against loopback names (protection of
    /// a local server against DNS rebinding). `serve` turns it off when it binds a
    /// non-loopback address, where `--api-key` is the protection to use.
    pub loopback_hosts_only: bool,
    /// Origins (`scheme://host[:port]`, or `*`) whose browser pages may call the
    /// server; requests from any other foreign origin are refused. The server's own
    /// origin is always allowed.
    pub allowed_origins: Vec<String>,
    /// Most connections open at once; further clients wait in the listen queue.
    pub max_connections: usize,
    /// Time a client has to send a request's headers (also the longest an idle
    /// keep-alive connection stays open).
    pub header_read_timeout: Duration,
    /// Time a client has to send a request's whole body, counted from the end of its
    /// headers whatever the rate at which the bytes come (`408` and the connection
    /// closed when it runs out).
    pub body_read_timeout: Duration,
    /// The language model behind `remember` / `recall_memory` (MCP tools and
    /// `POST /brain/remember`, `POST /brain/recall`).
    pub llm: Option<Arc<crate::brain::Llm>>,
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
            allowed_origins: Vec::new(),
            max_connections: 512,
            llm: None,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
        }
    }
}

#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) backend: Backend,
    pub(crate) config: Arc<HttpConfig>,
}

fn error_body(code: &str, message: impl Into<String>, hint: &str) -> Value {
    json!({"error": {"code": code, "message": message.into(), "hint": hint}})
}

fn error_response(
    status: StatusCode,
    code: &str,
    message: impl Into<String>,
    hint: &str,
) -> Response {
    (status, Json(error_body(code, message, hint))).into_response()
}

async fn auth(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if let Some(key) = &state.config.api_key {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token);
        let ok = given.is_some_and(|g| constant_time_eq(g.as_bytes(), key.as_bytes()));
        if !ok {
            let mut r = error_response(
                StatusCode::UNAUTHORIZED,
                "UNAUTHORIZED",
                if given.is_some() {
                    "wrong API key"
                } else {
                    "missing API key: this server requires one"
                },
                "send the header Authorization: Bearer <key> with the key the server was started with (--api-key or KIP_API_KEY)",
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    next.run(req).await
}

/// The token of an `Authorization: Bearer <token>` value. The scheme is matched
/// without regard to case (RFC 9110 §11.1: `bearer`, `BEARER`), followed by one or
/// more spaces.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, rest) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    Some(rest.trim_start_matches(' '))
}

/// The host name of a `Host` header value (without the port; IPv6 without brackets).
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

fn is_loopback_host(host: &str) -> bool {
    let name = host_name(host);
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn origin_allowed(origin: &str, host: Option<&str>, config: &HttpConfig) -> bool {
    if config
        .allowed_origins
        .iter()
        .any(|o| o == "*" || o.trim_end_matches('/').eq_ignore_ascii_case(origin))
    {
        return true;
    }
    // The server's own origin (a page it serves calling it back).
    host.is_some_and(|h| {
        ["http://", "https://"]
            .iter()
            .any(|scheme| origin.eq_ignore_ascii_case(&format!("{scheme}{h}")))
    })
}

const CORS_HEADERS: &str =
    "authorization, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id";

/// Host, Origin and Content-Type checks on every route, and CORS for allowed origins.
async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let config = &state.config;
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()));
    if config.loopback_hosts_only {
        if let Some(h) = &host {
            if !is_loopback_host(h) {
                return error_response(
                    StatusCode::FORBIDDEN,
                    "FORBIDDEN",
                    format!("requests addressed to host '{h}' are refused: this server listens on a loopback address and answers only localhost, 127.0.0.1 or [::1]"),
                    "address the server as localhost; to serve a network, bind a non-loopback address with --http ADDR and set --api-key",
                );
            }
        }
    }
    let origin = match req.headers().get(header::ORIGIN) {
        None => None,
        Some(v) => match v.to_str() {
            Ok(o) => Some(o.to_string()),
            Err(_) => {
                return error_response(
                    StatusCode::FORBIDDEN,
                    "FORBIDDEN",
                    "the Origin header is not valid text",
                    "send a valid Origin header",
                )
            }
        },
    };
    if let Some(o) = &origin {
        if !origin_allowed(o, host.as_deref(), config) {
            return error_response(
                StatusCode::FORBIDDEN,
                "FORBIDDEN",
                format!("cross-origin request from {o} refused"),
                &format!("a web page may call this server only from its own origin or one allowed with --allow-origin (start it with --allow-origin {o} to allow this one)"),
            );
        }
        if req.method() == Method::OPTIONS {
            let mut r = StatusCode::NO_CONTENT.into_response();
            let h = r.headers_mut();
            if let Ok(v) = HeaderValue::from_str(o) {
                h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
            }
            h.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
            );
            h.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static(CORS_HEADERS),
            );
            h.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static("600"),
            );
            h.insert(header::VARY, HeaderValue::from_static("Origin"));
            return r;
        }
    }
    if req.method() == Method::POST && matches!(req.uri().path(), "/kip" | "/explorer/api/kip") {
        let json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"));
        if !json {
            return error_response(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "UNSUPPORTED_MEDIA_TYPE",
                format!(
                    "POST {} takes a JSON body with Content-Type: application/json",
                    req.uri().path()
                ),
                "send the header Content-Type: application/json",
            );
        }
    }
    let mut resp = next.run(req).await;
    if let Some(o) = origin {
        let h = resp.headers_mut();
        if let Ok(v) = HeaderValue::from_str(&o) {
            h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
        }
        h.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("mcp-session-id"),
        );
        h.append(header::VARY, HeaderValue::from_static("Origin"));
    }
    resp
}

/// Every error answer gets a JSON body: responses of status 4xx/5xx whose body is not
/// JSON (the body limit's 413, a 404, a 405, the transport's own errors) are rewritten
/// as `{"error": {"code", "message", "hint"}}`, keeping the status and other headers.
async fn json_errors(resp: Response) -> Response {
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, 16 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let reason = status.canonical_reason().unwrap_or("error");
    let message = if text.is_empty() {
        reason.to_string()
    } else {
        format!("{reason}: {text}")
    };
    let (code, hint) = match status {
        StatusCode::PAYLOAD_TOO_LARGE => (
            "KIP_4002".to_string(),
            "the request body is larger than the server accepts (--max-body-bytes): split the batch or load large capsules with `kip import`",
        ),
        StatusCode::NOT_FOUND => ("NOT_FOUND".to_string(), "the routes are POST /kip, /mcp (MCP streamable HTTP), GET /health, and the explorer at /"),
        StatusCode::METHOD_NOT_ALLOWED => ("METHOD_NOT_ALLOWED".to_string(), "POST /kip; GET /health; /mcp takes POST, GET and DELETE"),
        StatusCode::REQUEST_TIMEOUT => ("REQUEST_TIMEOUT".to_string(), "send the whole request promptly"),
        _ => (format!("HTTP_{}", status.as_u16()), "check the request against the API description in the README"),
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let body = axum::body::Body::from(error_body(&code, message, hint).to_string());
    Response::from_parts(parts, body)
}

/// A request body that must arrive whole by a fixed deadline: a client that sends a
/// byte now and then cannot hold a connection (and one of the `max_connections` slots)
/// open longer than [`HttpConfig::body_read_timeout`]. When the deadline passes, the
/// next read fails and `expired` is set, so that [`body_deadline`] answers `408`.
struct DeadlineBody {
    body: axum::body::Body,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
    expired: Arc<AtomicBool>,
}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        if !this.body.is_end_stream() && this.deadline.as_mut().poll(cx).is_ready() {
            this.expired.store(true, Ordering::SeqCst);
            return std::task::Poll::Ready(Some(Err(axum::Error::new(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the request body did not arrive in time",
            )))));
        }
        std::pin::Pin::new(&mut this.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Bounds the time to read a request's body in total (see [`DeadlineBody`]); a body
/// that was not all there by the deadline is answered `408` whatever the handler made
/// of the failed read, and the connection is closed.
async fn body_deadline(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let limit = state.config.body_read_timeout;
    let expired = Arc::new(AtomicBool::new(false));
    let req = {
        let expired = expired.clone();
        req.map(|body| {
            if http_body::Body::is_end_stream(&body) {
                body
            } else {
                axum::body::Body::new(DeadlineBody {
                    body,
                    deadline: Box::pin(tokio::time::sleep(limit)),
                    expired,
                })
            }
        })
    };
    let resp = next.run(req).await;
    if !expired.load(Ordering::SeqCst) {
        return resp;
    }
    let mut r = error_response(
        StatusCode::REQUEST_TIMEOUT,
        "REQUEST_TIMEOUT",
        format!(
            "the request body did not arrive within {} ms of the headers",
            limit.as_millis()
        ),
        "send the whole request promptly; a client on a slow link can send smaller requests",
    );
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn health(State(state): State<AppState>) -> Response {
    let backend = state.backend.clone();
    match tokio::task::spawn_blocking(move || backend.totals()).await {
        Ok(Ok((c, p))) => Json(json!({"status": "ok", "concepts": c, "propositions": p, "read_only": state.config.read_only, "storage": state.backend.storage()})).into_response(),
        Ok(Err(e)) => (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "error", "message": e.message, "storage": state.backend.storage()}))).into_response(),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "error"}))).into_response(),
    }
}

/// `POST /brain/remember` (Formation) and `POST /brain/recall` (Recall): the body is
/// the tool's arguments object; the answer is the tool's result object.
async fn brain_call(state: AppState, body: Bytes, remember: bool) -> Response {
    let Some(llm) = state.config.llm.clone() else {
        return (
            StatusCode::NOT_FOUND,
            Json(error_body(
                "KIP_3002",
                "no language model is configured",
                "start the server with --llm URL#MODEL (or KIP_LLM)",
            )),
        )
            .into_response();
    };
    if remember && state.config.read_only {
        return (
            StatusCode::FORBIDDEN,
            Json(error_body(
                "KIP_3004",
                "remember writes, and this server is read-only",
                "use POST /brain/recall",
            )),
        )
            .into_response();
    }
    let args: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                Json(error_body(
                    "KIP_1001",
                    format!("the request body is not valid JSON: {e}"),
                    "send the tool's arguments object",
                )),
            )
                .into_response()
        }
    };
    let backend = state.backend.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        if remember {
            crate::brain::remember(&backend, &llm, &args)
        } else {
            crate::brain::recall(&backend, &llm, &args)
        }
    })
    .await;
    blocking_answer(
        outcome.map(|r| r.map(|v| json!({"result": v}))),
        StatusCode::BAD_REQUEST,
    )
}

/// The response to an engine call run on the blocking pool: its value, its error (with
/// `error_status`) or the task's failure (500).
fn blocking_answer(
    outcome: Result<Result<Value, kip_lang::KipError>, tokio::task::JoinError>,
    error_status: StatusCode,
) -> Response {
    match outcome {
        Ok(Ok(v)) => Json(v).into_response(),
        Ok(Err(e)) => (error_status, Json(json!({"error": e.to_json()}))).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(error_body(
                "KIP_4003",
                e.to_string(),
                "retry; see the server log",
            )),
        )
            .into_response(),
    }
}

async fn brain_remember(State(state): State<AppState>, body: Bytes) -> Response {
    brain_call(state, body, true).await
}

async fn brain_recall(State(state): State<AppState>, body: Bytes) -> Response {
    brain_call(state, body, false).await
}

/// `GET /memory/health`: the memory's health report (SystemInstructions.md metrics).
async fn memory_health(State(state): State<AppState>) -> Response {
    let backend = state.backend.clone();
    blocking_answer(
        tokio::task::spawn_blocking(move || backend.health()).await,
        StatusCode::SERVICE_UNAVAILABLE,
    )
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
        Some(Value::String(m)) if m == "list_logs" => {
            let params = v.get("params").cloned().unwrap_or(json!({}));
            let body = match crate::list_logs_args(&params) {
                Ok((cursor, limit)) => {
                    let backend = state.backend.clone();
                    match tokio::task::spawn_blocking(move || backend.list_logs(cursor, limit))
                        .await
                    {
                        Ok(Ok(page)) => page,
                        Ok(Err(e)) => json!({"error": e.to_json()}),
                        Err(e) => {
                            error_body("KIP_4003", e.to_string(), "retry; see the server log")
                        }
                    }
                }
                Err(e) => json!({"error": e.to_json()}),
            };
            return Json(wrap(is_rpc, rpc_id, body)).into_response();
        }
        Some(other) => {
            let body = error_body(
                "KIP_1001",
                format!("unknown method {other}"),
                "use \"execute_kip\", \"execute_kip_readonly\" or \"list_logs\"",
            );
            return (StatusCode::BAD_REQUEST, Json(wrap(is_rpc, rpc_id, body))).into_response();
        }
        None => (v, Access::ReadWrite),
    };
    if state.config.read_only {
        access = Access::ReadOnly;
    }
    let response = crate::run_budgeted(
        state.backend.clone(),
        args,
        access,
        state.config.request_timeout,
        "http",
    )
    .await;
    Json(wrap(is_rpc, rpc_id, response)).into_response()
}

fn wrap(is_rpc: bool, id: Option<Value>, response: Value) -> Value {
    if is_rpc {
        json!({"jsonrpc": "2.0", "id": id.unwrap_or(Value::Null), "result": response})
    } else {
        response
    }
}

/// The router: `/mcp`, `/kip`, `/health`, the explorer (`/`, `/explorer/*`), with
/// auth, limits and request logs.
pub fn router(backend: impl Into<Backend>, config: HttpConfig) -> Router {
    let backend: Backend = backend.into();
    let mut tools = config.tools;
    tools.read_only |= config.read_only;
    let mcp_backend = backend.clone();
    let mcp_timeout = config.request_timeout;
    let mcp_llm = config.llm.clone();
    let mut mcp_config =
        StreamableHttpServerConfig::default().with_max_request_body_bytes(config.max_body_bytes);
    if !config.loopback_hosts_only {
        mcp_config = mcp_config.disable_allowed_hosts();
    }
    let mcp = StreamableHttpService::new(
        move || {
            Ok(KipMcp::new(mcp_backend.clone(), tools)
                .with_timeout(mcp_timeout)
                .with_llm(mcp_llm.clone()))
        },
        Arc::new(LocalSessionManager::default()),
        mcp_config,
    );
    let state = AppState {
        backend,
        config: Arc::new(config.clone()),
    };
    let protected = Router::new()
        .route("/health", get(health))
        .route("/memory/health", get(memory_health))
        .route("/brain/remember", post(brain_remember))
        .route("/brain/recall", post(brain_recall))
        .route("/kip", post(kip))
        .merge(crate::explorer::api_routes())
        .nest_service("/mcp", crate::mcp::session_delete_no_content(mcp))
        .layer(middleware::from_fn_with_state(state.clone(), auth));
    crate::explorer::public_routes()
        .merge(protected)
        .layer(DefaultBodyLimit::max(config.max_body_bytes))
        .layer(middleware::from_fn_with_state(state.clone(), body_deadline))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(middleware::map_response(json_errors))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

/// Serves the router on `addr` until ctrl-c.
pub async fn serve(
    nexus: impl Into<Backend>,
    addr: SocketAddr,
    config: HttpConfig,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    serve_bound(nexus, listener, config).await
}

/// [`serve`] on an already bound listener: a non-loopback address turns the loopback
/// Host check off (and warns without an API key); serves until ctrl-c.
pub async fn serve_bound(
    nexus: impl Into<Backend>,
    listener: tokio::net::TcpListener,
    mut config: HttpConfig,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() {
        config.loopback_hosts_only = false;
        if config.api_key.is_none() {
            tracing::warn!(%addr, "serving on a non-loopback address without --api-key: anyone who can reach it can read and write the memory");
        }
    }
    tracing::info!(%addr, "kip-nexus serving MCP at /mcp, the JSON API at /kip and the explorer at /");
    serve_listener(nexus, listener, config).await
}

/// Serves on an already bound listener until ctrl-c.
pub async fn serve_listener(
    nexus: impl Into<Backend>,
    listener: tokio::net::TcpListener,
    config: HttpConfig,
) -> std::io::Result<()> {
    serve_until(nexus, listener, config, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
}

/// Serves on `listener` until `shutdown` completes, then lets open requests finish
/// (at most 10 s). At most [`HttpConfig::max_connections`] connections are served at
/// once (the next ones wait in the kernel's listen queue, so a flood of idle clients
/// cannot exhaust the process's file descriptors); each must send its request headers
/// within [`HttpConfig::header_read_timeout`], which also closes idle keep-alive
/// connections.
pub async fn serve_until(
    nexus: impl Into<Backend>,
    listener: tokio::net::TcpListener,
    config: HttpConfig,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let permits = Arc::new(tokio::sync::Semaphore::new(config.max_connections.max(1)));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(config.header_read_timeout)
        .keep_alive(true);
    let app = router(nexus, config);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut last_accept_warning: Option<std::time::Instant> = None;
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of descriptors or a transient network error: wait a little
                    // instead of spinning, and say so at most once a minute.
                    if last_accept_warning.is_none_or(|t| t.elapsed() > Duration::from_secs(60)) {
                        tracing::warn!(error = %e, "cannot accept a connection");
                        last_accept_warning = Some(std::time::Instant::now());
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let conn = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(Duration::from_secs(10)) => {
            tracing::warn!("requests still running 10 s after shutdown began; stopping anyway");
        }
    }
    Ok(())
}
