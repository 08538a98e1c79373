//! The HTTP JSON API: both body forms, auth, read-only mode, body limit, health, and
//! many concurrent clients mixing reads and writes with no lost write.

use axum::body::{to_bytes, Body};
use axum::http::{Request, StatusCode};
use kip_engine::Nexus;
use kip_server::http::{router, HttpConfig};
use serde_json::{json, Value};
use std::sync::Arc;
use tower::ServiceExt;

fn nexus() -> Arc<Nexus> {
    Arc::new(Nexus::in_memory().expect("nexus"))
}

async fn call(
    app: &axum::Router,
    method: &str,
    path: &str,
    body: Option<Value>,
    key: Option<&str>,
) -> (StatusCode, Value) {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json");
    if let Some(k) = key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    let body = body
        .map(|b| Body::from(b.to_string()))
        .unwrap_or_else(Body::empty);
    let resp = app
        .clone()
        .oneshot(req.body(body).expect("request"))
        .await
        .expect("response");
    let status = resp.status();
    let bytes = to_bytes(resp.into_body(), usize::MAX).await.expect("body");
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn kip_accepts_the_envelope_and_the_method_params_form() {
    let app = router(nexus(), HttpConfig::default());
    let (s, v) = call(
        &app,
        "POST",
        "/kip",
        Some(json!({"command": "DESCRIBE DOMAINS"})),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert!(v["result"].is_array());
    let (_, v) = call(
        &app,
        "POST",
        "/kip",
        Some(
            json!({"method": "execute_kip", "params": {"commands": ["DESCRIBE DOMAINS", "FIND("]}}),
        ),
        None,
    )
    .await;
    assert_eq!(v["result"][1]["error"]["code"], "KIP_1001");
    let (_, v) = call(&app, "POST", "/kip", Some(json!({"jsonrpc": "2.0", "id": 7, "method": "execute_kip_readonly", "params": {"command": "DESCRIBE PRIMER"}})), None).await;
    assert_eq!(v["id"], 7);
    assert!(v["result"]["result"]["domain_map"].is_array());
    let (s, v) = call(
        &app,
        "POST",
        "/kip",
        Some(json!({"method": "drop_tables", "params": {}})),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(v["error"]["code"], "KIP_1001");
    let resp = app
        .clone()
        .oneshot(
            Request::builder()
                .method("POST")
                .uri("/kip")
                .body(Body::from("{nope"))
                .expect("req"),
        )
        .await
        .expect("resp");
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn readonly_method_refuses_writes() {
    let app = router(nexus(), HttpConfig::default());
    let (_, v) = call(&app, "POST", "/kip", Some(json!({"method": "execute_kip_readonly", "params": {"command": "UPSERT { CONCEPT ?p { {type: \"Person\", name: \"X\"} } }"}})), None).await;
    assert_eq!(v["error"]["code"], "KIP_3004");
}

#[tokio::test]
async fn every_route_requires_the_key_when_one_is_set() {
    let app = router(
        nexus(),
        HttpConfig {
            api_key: Some("s3cret".into()),
            ..HttpConfig::default()
        },
    );
    for (m, p) in [("GET", "/health"), ("POST", "/kip"), ("POST", "/mcp")] {
        let (s, _) = call(
            &app,
            m,
            p,
            Some(json!({"command": "DESCRIBE PRIMER"})),
            None,
        )
        .await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{m} {p}");
        let (s, _) = call(
            &app,
            m,
            p,
            Some(json!({"command": "DESCRIBE PRIMER"})),
            Some("wrong"),
        )
        .await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{m} {p}");
    }
    let (s, v) = call(&app, "GET", "/health", None, Some("s3cret")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["status"], "ok");
}

#[tokio::test]
async fn read_only_server_serves_reads_only() {
    let app = router(
        nexus(),
        HttpConfig {
            read_only: true,
            ..HttpConfig::default()
        },
    );
    let (_, v) = call(
        &app,
        "POST",
        "/kip",
        Some(json!({"command": "UPSERT { CONCEPT ?p { {type: \"Person\", name: \"X\"} } }"})),
        None,
    )
    .await;
    assert_eq!(v["error"]["code"], "KIP_3004");
    let (_, v) = call(
        &app,
        "POST",
        "/kip",
        Some(json!({"command": "FIND(COUNT(?p)) WHERE { ?p {type: \"Person\"} }"})),
        None,
    )
    .await;
    assert_eq!(v["result"], 2);
    let (_, v) = call(&app, "GET", "/health", None, None).await;
    assert_eq!(v["read_only"], true);
}

#[tokio::test]
async fn oversized_bodies_are_refused() {
    let app = router(
        nexus(),
        HttpConfig {
            max_body_bytes: 1024,
            ..HttpConfig::default()
        },
    );
    let big = json!({"command": format!("SEARCH CONCEPT \"{}\"", "x".repeat(4096))});
    let (s, _) = call(&app, "POST", "/kip", Some(big), None).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_clients_mixing_reads_and_writes_lose_nothing() {
    let n = nexus();
    n.load_capsule(r#"UPSERT { CONCEPT ?t { {type: "$ConceptType", name: "Note"} SET ATTRIBUTES { description: "a note" } } }"#)
        .expect("schema");
    let app = router(n.clone(), HttpConfig::default());
    let mut tasks = Vec::new();
    for c in 0..50 {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..6 {
                let body = if i % 2 == 0 {
                    json!({"command": format!("UPSERT {{ CONCEPT ?n {{ {{type: \"Note\", name: \"c{c}-{i}\"}} SET ATTRIBUTES {{ i: {i} }} }} }}")})
                } else {
                    json!({"commands": ["FIND(COUNT(?n)) WHERE { ?n {type: \"Note\"} }", "SEARCH CONCEPT \"c1\" LIMIT 3"]})
                };
                let (s, v) = call(&app, "POST", "/kip", Some(body), None).await;
                assert_eq!(s, StatusCode::OK);
                assert!(v.get("error").is_none(), "{v}");
            }
        }));
    }
    for t in tasks {
        t.await.expect("client task");
    }
    let (_, v) = call(
        &app,
        "POST",
        "/kip",
        Some(json!({"command": "FIND(COUNT(?n)) WHERE { ?n {type: \"Note\"} }"})),
        None,
    )
    .await;
    assert_eq!(v["result"], 150);
    assert!(n.check_integrity().expect("integrity").is_empty());
}

#[tokio::test]
async fn mcp_refuses_foreign_host_headers_on_a_loopback_server() {
    let app = router(nexus(), HttpConfig::default());
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let send = |host: &'static str| {
        Request::builder()
            .method("POST")
            .uri("/mcp")
            .header("host", host)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Body::from(init.to_string()))
            .expect("request")
    };
    let ok = app
        .clone()
        .oneshot(send("127.0.0.1:8080"))
        .await
        .expect("response");
    assert_eq!(ok.status(), StatusCode::OK);
    let rebinding = app
        .clone()
        .oneshot(send("evil.example:8080"))
        .await
        .expect("response");
    assert!(
        rebinding.status().is_client_error(),
        "{}",
        rebinding.status()
    );
}
