//! The memory explorer: a web page served at `/` by `kip serve --http` for the person
//! who owns the memory (overview, search, concept pages, a neighbourhood graph, a KIP
//! console and the audit log), and the same concept view as an MCP App
//! (`ui://kip-nexus/concept.html`, see [`app`]).
//!
//! - The page, its script and style and the vendored graph library (cytoscape.js, MIT,
//!   `assets/explorer/vendor/`) are compiled into the binary: it works offline. They
//!   carry no data, so they are served without the API key; every data route
//!   (`/explorer/api/*`) sits behind the same bearer-token check as `/kip`, and the
//!   page asks for the key when the server has one.
//! - Every response of the page has a strict Content-Security-Policy (scripts, styles
//!   and connections from the server's own origin only, no inline script, no frames),
//!   and the script renders every stored string as text (`textContent`), never as HTML.
//! - The console reads with `execute_kip_readonly`. It writes only when the server has
//!   an API key (which the page then holds) and is not `--read-only`, and only after an
//!   explicit confirmation in the page; the server refuses explorer writes otherwise.
//!   Console calls are recorded in the audit log with the interface `explorer`; the
//!   page's own reads (overview, concept pages, search box) are not.
//!
//! Semantics and screenshots: `docs/explorer.md`.

pub mod app;
pub mod view;

use crate::http::AppState;
use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use kip_engine::Access;
use serde_json::{json, Value};
use std::collections::HashMap;

const INDEX_HTML: &str = include_str!("../../assets/explorer/index.html");
const APP_JS: &str = include_str!("../../assets/explorer/app.js");
const APP_CSS: &str = include_str!("../../assets/explorer/app.css");
const CYTOSCAPE_JS: &str = include_str!("../../assets/explorer/vendor/cytoscape.min.js");
const FAVICON: &str = include_str!("../../assets/explorer/favicon.svg");
const LICENSES: &str = concat!(
    "The kip-nexus explorer embeds cytoscape.js 3.34.4 (npm package cytoscape, ",
    "file dist/cytoscape.min.js), under this license:\n\n",
    include_str!("../../assets/explorer/vendor/cytoscape.LICENSE")
);

/// The Content-Security-Policy of the explorer's page: its own scripts, styles and
/// connections only; no inline script or style element, no plugins, no frames, no
/// forms, no base-URI tricks.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

async fn app_css() -> Response {
    asset("text/css; charset=utf-8", APP_CSS)
}

async fn cytoscape_js() -> Response {
    asset("text/javascript; charset=utf-8", CYTOSCAPE_JS)
}

async fn favicon() -> Response {
    asset("image/svg+xml", FAVICON)
}

async fn licenses() -> Response {
    asset("text/plain; charset=utf-8", LICENSES)
}

/// Whether the explorer may write: the server has an API key (so the page that
/// writes has proven it holds it) and is not read-only.
fn writes_enabled(state: &AppState) -> bool {
    state.config.api_key.is_some() && !state.config.read_only
}

/// `GET /explorer/api/config` (no key needed: it tells the page whether to ask for
/// one).
async fn config(State(state): State<AppState>) -> Response {
    Json(json!({
        "name": "kip-nexus",
        "version": env!("CARGO_PKG_VERSION"),
        "auth_required": state.config.api_key.is_some(),
        "read_only": state.config.read_only,
        "writes_enabled": writes_enabled(&state),
    }))
    .into_response()
}

fn query_object(q: HashMap<String, String>) -> Value {
    Value::Object(q.into_iter().map(|(k, v)| (k, Value::String(v))).collect())
}

/// Runs a view builder on the blocking pool and answers its value, or its KIP error
/// (404 for a missing concept, 400 otherwise).
async fn view_answer(
    state: AppState,
    f: impl FnOnce(&crate::Backend) -> Result<Value, kip_lang::KipError> + Send + 'static,
) -> Response {
    let backend = state.backend.clone();
    match tokio::task::spawn_blocking(move || f(&backend)).await {
        Ok(Ok(v)) => Json(v).into_response(),
        Ok(Err(e)) => {
            let status = match e.code {
                kip_lang::ErrorCode::NotFound => StatusCode::NOT_FOUND,
                kip_lang::ErrorCode::ExecutionTimeout => StatusCode::SERVICE_UNAVAILABLE,
                kip_lang::ErrorCode::InternalError => StatusCode::INTERNAL_SERVER_ERROR,
                _ => StatusCode::BAD_REQUEST,
            };
            (status, Json(json!({"error": e.to_json()}))).into_response()
        }
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": {"code": "KIP_4003", "message": e.to_string(), "hint": "retry; see the server log"}})),
        )
            .into_response(),
    }
}

async fn overview(State(state): State<AppState>) -> Response {
    view_answer(state, view::overview).await
}

async fn concept(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let args = query_object(q);
    view_answer(state, move |b| {
        let which = view::ConceptRef::from_args(&args)?;
        let limit = view::item_limit(&args)?;
        view::concept_view(b, &which, limit)
    })
    .await
}

async fn search(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let args = query_object(q);
    view_answer(state, move |b| view::search(b, &args)).await
}

async fn list(State(state): State<AppState>, Query(q): Query<HashMap<String, String>>) -> Response {
    let args = query_object(q);
    view_answer(state, move |b| view::list(b, &args)).await
}

async fn logs(State(state): State<AppState>, Query(q): Query<HashMap<String, String>>) -> Response {
    let args = query_object(q);
    view_answer(state, move |b| view::logs(b, &args)).await
}

/// `POST /explorer/api/kip` `{command | commands, parameters?, dry_run?, write?}`: the
/// console (an `execute_kip` arguments object plus `write`). Without
/// `write: true` the command runs read-only (a KML statement gets KIP_3004 explaining
/// how to write); with it, the server must allow explorer writes.
async fn console(State(state): State<AppState>, body: axum::body::Bytes) -> Response {
    let v: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": {"code": "KIP_1001", "message": "the request body is not a JSON object", "hint": "send {\"command\": \"...\", \"parameters\": {...}, \"write\": false}"}})),
            )
                .into_response()
        }
    };
    let write = v.get("write").and_then(Value::as_bool).unwrap_or(false);
    if write && !writes_enabled(&state) {
        let why = if state.config.read_only {
            "this server is read-only (--read-only)"
        } else {
            "this server has no API key"
        };
        return (
            StatusCode::FORBIDDEN,
            Json(json!({"error": {"code": "KIP_3004", "message": format!("the explorer cannot write: {why}"), "hint": "the explorer writes only on a server started with --api-key (or KIP_API_KEY) and without --read-only, with that key entered in the page"}})),
        )
            .into_response();
    }
    // The body is an `execute_kip` arguments object (`command` or `commands`,
    // `parameters`, `dry_run`) plus `write`: passed on whole, so that a batch runs and
    // a malformed request gets the envelope's own error naming what it has.
    let mut args = v;
    if let Value::Object(m) = &mut args {
        m.remove("write");
    }
    let access = if write {
        Access::ReadWrite
    } else {
        Access::ReadOnly
    };
    let response = crate::run_budgeted(
        state.backend.clone(),
        args,
        access,
        state.config.request_timeout,
        "explorer",
    )
    .await;
    Json(response).into_response()
}

/// The page and its files: served without the API key (they hold no data).
pub(crate) fn public_routes() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/explorer", get(index))
        .route("/explorer/app.js", get(app_js))
        .route("/explorer/app.css", get(app_css))
        .route("/explorer/vendor/cytoscape.min.js", get(cytoscape_js))
        .route("/explorer/licenses.txt", get(licenses))
        .route("/explorer/favicon.svg", get(favicon))
        .route("/favicon.ico", get(favicon))
        .route("/explorer/api/config", get(config))
}

/// The explorer's data routes (behind the API key when the server has one).
pub(crate) fn api_routes() -> Router<AppState> {
    Router::new()
        .route("/explorer/api/overview", get(overview))
        .route("/explorer/api/concept", get(concept))
        .route("/explorer/api/search", get(search))
        .route("/explorer/api/logs", get(logs))
        .route("/explorer/api/list", get(list))
        .route("/explorer/api/kip", post(console))
}
