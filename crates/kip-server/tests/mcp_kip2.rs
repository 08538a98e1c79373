//! `kip serve --kip 2.0` (DECISIONS.md item 39): the MCP tools take KIP 2.0 arguments
//! (the 2.0 function definitions) and answer 2.0 response envelopes; the documents and
//! the instructions are 2.0's.

use axum::body::Body;
use axum::http::Request;
use kip_server::mcp::{KipMcp, ToolSets};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{json, Value};
use std::sync::Arc;
use tower::ServiceExt;

fn service() -> axum::Router {
    let nexus = Arc::new(kip_open::testing::nexus().expect("nexus"));
    let tools = ToolSets {
        kip2: true,
        ..ToolSets::default()
    };
    let mcp = StreamableHttpService::new(
        move || Ok(KipMcp::new(nexus.clone(), tools)),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    axum::Router::new().nest_service("/mcp", mcp)
}

fn post(body: Value, session: Option<&str>) -> Request<Body> {
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

/// The JSON-RPC message with an `id` in a response body (plain JSON or server-sent
/// events).
async fn message(resp: axum::response::Response) -> Value {
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .expect("body");
    let text = String::from_utf8_lossy(&body).to_string();
    if let Ok(v) = serde_json::from_str::<Value>(&text) {
        return v;
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or(Value::Null)
}

/// An initialized session: its id and the `initialize` result.
async fn session(app: &axum::Router) -> (String, Value) {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let resp = app
        .clone()
        .oneshot(post(init, None))
        .await
        .expect("response");
    let id = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session id")
        .to_string();
    let result = message(resp).await;
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    app.clone()
        .oneshot(post(done, Some(&id)))
        .await
        .expect("response");
    (id, result)
}

async fn call(app: &axum::Router, session: &str, id: u64, method: &str, params: Value) -> Value {
    let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let resp = app
        .clone()
        .oneshot(post(req, Some(session)))
        .await
        .expect("response");
    message(resp).await["result"].clone()
}

#[tokio::test]
async fn a_kip2_server_speaks_kip2_to_its_agents() {
    let app = service();
    let (s, init) = session(&app).await;
    assert!(init["result"]["instructions"]
        .as_str()
        .is_some_and(|i| i.contains("KIP 2.0")));
    let tools = call(&app, &s, 2, "tools/list", json!({})).await;
    let execute = tools["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["name"] == "execute_kip")
        .cloned()
        .expect("execute_kip listed");
    assert!(execute["description"]
        .as_str()
        .is_some_and(|d| d.contains("KIP 2.0")));
    assert!(execute["inputSchema"]["properties"]
        .get("operations")
        .is_some());

    let r = call(
        &app,
        &s,
        3,
        "tools/call",
        json!({"name": "execute_kip", "arguments": {"command": "DESCRIBE PROTOCOL"}}),
    )
    .await;
    assert_eq!(r["isError"], json!(false));
    assert_eq!(r["structuredContent"]["kip"], "2.0");
    assert_eq!(r["structuredContent"]["status"], "succeeded");
    assert_eq!(r["structuredContent"]["results"][0]["result"]["kip"], "2.0");

    let r = call(
        &app,
        &s,
        4,
        "tools/call",
        json!({"name": "execute_kip_readonly", "arguments": {"operations": ["DESCRIBE PROTOCOL", r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Eve" }"#], "execution": {"mode": "independent"}}}),
    )
    .await;
    assert_eq!(r["isError"], json!(true));
    assert_eq!(r["structuredContent"]["status"], "partial");
    assert_eq!(
        r["structuredContent"]["results"][1]["error"]["code"],
        "ReadonlyViolation"
    );

    let doc = call(
        &app,
        &s,
        5,
        "resources/read",
        json!({"uri": "kip://docs/syntax"}),
    )
    .await;
    assert!(doc["contents"][0]["text"]
        .as_str()
        .is_some_and(|t| t.contains("2.0")));
}
