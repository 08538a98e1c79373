//! The end of an MCP streamable HTTP session: a client's DELETE answers 204, which the
//! official clients take as success (rmcp's own answer, 202, makes the Python client
//! warn "Session termination failed: 202" after every session).

use axum::body::Body;
use axum::http::{Request, StatusCode};
use kip_server::mcp::{session_delete_no_content, KipMcp, ToolSets};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use std::sync::Arc;
use tower::ServiceExt;

fn service() -> axum::Router {
    let nexus = Arc::new(kip_open::testing::nexus().expect("nexus"));
    let mcp = StreamableHttpService::new(
        move || Ok(KipMcp::new(nexus.clone(), ToolSets::default())),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    axum::Router::new().nest_service("/mcp", session_delete_no_content(mcp))
}

fn post(body: serde_json::Value, session: Option<&str>) -> Request<Body> {
    let mut r = Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("host", "127.0.0.1:8080")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18");
    if let Some(s) = session {
        r = r.header("mcp-session-id", s);
    }
    r.body(Body::from(body.to_string())).expect("request")
}

#[tokio::test]
async fn deleting_an_mcp_session_answers_no_content() {
    let app = service();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let resp = app
        .clone()
        .oneshot(post(init, None))
        .await
        .expect("response");
    assert_eq!(resp.status(), StatusCode::OK);
    let session = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session id")
        .to_string();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let resp = app
        .clone()
        .oneshot(post(initialized, Some(&session)))
        .await
        .expect("response");
    assert!(resp.status().is_success(), "{}", resp.status());
    let delete = Request::builder()
        .method("DELETE")
        .uri("/mcp")
        .header("host", "127.0.0.1:8080")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .body(Body::empty())
        .expect("request");
    let resp = app.clone().oneshot(delete).await.expect("response");
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .expect("body");
    assert!(body.is_empty());
    // The session is gone: a call in it is refused.
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let resp = app
        .oneshot(post(list, Some(&session)))
        .await
        .expect("response");
    assert!(resp.status().is_client_error(), "{}", resp.status());
}
