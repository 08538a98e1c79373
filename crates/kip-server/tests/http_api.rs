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
    Arc::new(kip_open::testing::nexus().expect("nexus"))
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
                .header("content-type", "application/json")
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
        let (s, v) = call(
            &app,
            m,
            p,
            Some(json!({"command": "DESCRIBE PRIMER"})),
            Some("wrong"),
        )
        .await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{m} {p}");
        // Its own code, not a KIP error code (it is not ImmutableTarget).
        assert_eq!(v["error"]["code"], "UNAUTHORIZED", "{m} {p}: {v}");
        assert_eq!(v["error"]["message"], "wrong API key");
    }
    let (s, v) = call(&app, "GET", "/health", None, Some("s3cret")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["status"], "ok");
}

/// The auth scheme is case-insensitive (RFC 9110 §11.1) and may be followed by more
/// than one space; another scheme, or none, is refused.
#[tokio::test]
async fn the_bearer_scheme_is_matched_without_regard_to_case() {
    let app = router(
        nexus(),
        HttpConfig {
            api_key: Some("s3cret".into()),
            ..HttpConfig::default()
        },
    );
    let health = |auth: &'static str| {
        let app = app.clone();
        async move {
            let req = Request::builder()
                .uri("/health")
                .header("authorization", auth)
                .body(Body::empty())
                .expect("request");
            app.oneshot(req).await.expect("response").status()
        }
    };
    for ok in [
        "Bearer s3cret",
        "bearer s3cret",
        "BEARER s3cret",
        "bEaReR  s3cret",
    ] {
        assert_eq!(health(ok).await, StatusCode::OK, "{ok}");
    }
    for refused in [
        "Basic s3cret",
        "Bearers3cret",
        "s3cret",
        "bearer wrong",
        "bearer",
    ] {
        assert_eq!(health(refused).await, StatusCode::UNAUTHORIZED, "{refused}");
    }
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
    let (s, v) = call(&app, "POST", "/kip", Some(big), None).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    // Every error body is JSON, this one included.
    assert_eq!(v["error"]["code"], "KIP_4002", "{v}");
    assert!(v["error"]["hint"].as_str().is_some_and(|h| !h.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_clients_mixing_reads_and_writes_lose_nothing() {
    let n = nexus();
    kip_open::testing::blocking(|| n.load_capsule(r#"UPSERT { CONCEPT ?t { {type: "$ConceptType", name: "Note"} SET ATTRIBUTES { description: "a note" } } }"#))
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
    let problems = kip_open::testing::blocking(|| n.admin().check_integrity()).expect("integrity");
    assert!(problems.is_empty(), "{problems:?}");
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

async fn send(
    app: &axum::Router,
    req: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, Value) {
    let resp = app.clone().oneshot(req).await.expect("response");
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = to_bytes(resp.into_body(), usize::MAX).await.expect("body");
    (
        status,
        headers,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn upsert_person(name: &str) -> String {
    json!({"command": format!("UPSERT {{ CONCEPT ?p {{ {{type: \"Person\", name: \"{name}\"}} }} }}")}).to_string()
}

async fn count_named(app: &axum::Router, name: &str) -> Value {
    let (_, v) = call(
        app,
        "POST",
        "/kip",
        Some(json!({"command": format!("FIND(COUNT(?p)) WHERE {{ ?p {{type: \"Person\", name: \"{name}\"}} }}")})),
        None,
    )
    .await;
    v["result"].clone()
}

/// A web page on another site cannot write (or read) through the user's browser: a
/// cross-site `text/plain` POST (a "simple request" browsers send without preflight)
/// with a foreign Origin is refused and changes nothing; a foreign Host (DNS rebinding)
/// is refused on every route; `/kip` takes JSON only.
#[tokio::test]
async fn cross_site_requests_are_refused_on_every_route() {
    let app = router(nexus(), HttpConfig::default());
    let forged = Request::builder()
        .method("POST")
        .uri("/kip")
        .header("host", "127.0.0.1:8080")
        .header("origin", "https://evil.example")
        .header("content-type", "text/plain")
        .body(Body::from(upsert_person("Mallory")))
        .expect("req");
    let (s, _, v) = send(&app, forged).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(v["error"]["code"], "FORBIDDEN", "{v}");
    assert!(v["error"]["hint"]
        .as_str()
        .unwrap_or("")
        .contains("--allow-origin"));
    // Without an Origin, text/plain is still refused: JSON only.
    let plain = Request::builder()
        .method("POST")
        .uri("/kip")
        .header("content-type", "text/plain")
        .body(Body::from(upsert_person("Mallory")))
        .expect("req");
    let (s, _, v) = send(&app, plain).await;
    assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(v["error"]["code"], "UNSUPPORTED_MEDIA_TYPE");
    assert_eq!(count_named(&app, "Mallory").await, 0);
    // A foreign Host is refused on every route, /health included.
    for (m, p) in [("GET", "/health"), ("POST", "/kip"), ("POST", "/mcp")] {
        let req = Request::builder()
            .method(m)
            .uri(p)
            .header("host", "rebound.evil.example:8080")
            .header("content-type", "application/json")
            .body(Body::from(upsert_person("Mallory")))
            .expect("req");
        let (s, _, v) = send(&app, req).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{m} {p}");
        assert_eq!(v["error"]["code"], "FORBIDDEN");
    }
    // /mcp refuses a foreign Origin too.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let req = Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("host", "localhost:8080")
        .header("origin", "http://evil.example")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Body::from(init.to_string()))
        .expect("req");
    let (s, _, _) = send(&app, req).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    // The server's own origin (a page it serves) is allowed.
    let same = Request::builder()
        .method("POST")
        .uri("/kip")
        .header("host", "localhost:8080")
        .header("origin", "http://localhost:8080")
        .header("content-type", "application/json")
        .body(Body::from(upsert_person("Alice")))
        .expect("req");
    let (s, _, v) = send(&app, same).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(count_named(&app, "Alice").await, 1);
}

/// `--allow-origin` lets a page from that origin call the server: preflights are
/// answered with the CORS headers, responses carry Access-Control-Allow-Origin; a
/// preflight from another origin is refused.
#[tokio::test]
async fn allowed_origins_get_cors() {
    let app = router(
        nexus(),
        HttpConfig {
            allowed_origins: vec!["http://localhost:5173".into()],
            ..HttpConfig::default()
        },
    );
    let pre = |origin: &str| {
        Request::builder()
            .method("OPTIONS")
            .uri("/kip")
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "content-type, authorization",
            )
            .body(Body::empty())
            .expect("req")
    };
    let (s, h, _) = send(&app, pre("http://localhost:5173")).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    assert_eq!(h["access-control-allow-origin"], "http://localhost:5173");
    assert!(h["access-control-allow-methods"]
        .to_str()
        .unwrap_or("")
        .contains("POST"));
    assert!(h["access-control-allow-headers"]
        .to_str()
        .unwrap_or("")
        .contains("authorization"));
    let (s, h, _) = send(&app, pre("http://other.example")).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert!(h.get("access-control-allow-origin").is_none());
    let req = Request::builder()
        .method("POST")
        .uri("/kip")
        .header("origin", "http://localhost:5173")
        .header("content-type", "application/json")
        .body(Body::from(
            json!({"command": "DESCRIBE DOMAINS"}).to_string(),
        ))
        .expect("req");
    let (s, h, v) = send(&app, req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(h["access-control-allow-origin"], "http://localhost:5173");
}

/// Unknown routes and methods answer JSON errors too.
#[tokio::test]
async fn every_error_body_is_json() {
    let app = router(nexus(), HttpConfig::default());
    let (s, v) = call(&app, "GET", "/nope", None, None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(v["error"]["code"], "NOT_FOUND");
    let (s, v) = call(&app, "GET", "/kip", None, None).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(v["error"]["code"], "METHOD_NOT_ALLOWED");
}

/// A request that runs out of time is stopped, and the answer says exactly what was
/// applied: the regression of a batch [slow FINDs, UPSERT] answered KIP_4001 whose
/// UPSERT was committed seconds later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_request_stops_and_reports_what_it_applied() {
    let n = nexus();
    let mut capsule = String::from("UPSERT {");
    for i in 0..400 {
        capsule.push_str(&format!(
            " CONCEPT ?p{i} {{ {{type: \"Person\", name: \"p{i}\"}} }}"
        ));
    }
    capsule.push_str(" }");
    kip_open::testing::blocking(|| n.load_capsule(&capsule)).expect("people");
    let app = router(
        n.clone(),
        HttpConfig {
            request_timeout: std::time::Duration::from_millis(700),
            ..HttpConfig::default()
        },
    );
    let slow = "FIND(?a.name) WHERE { ?a {type: \"Person\"} ?b {type: \"Person\"} ?c {type: \"Person\"} FILTER(?a.name == ?b.name && ?b.name == ?c.name && ?a.name == \"none\") }";
    let body = json!({"commands": [slow, slow, slow, slow, "UPSERT { CONCEPT ?p { {type: \"Person\", name: \"Late\"} } }"]});
    let started = std::time::Instant::now();
    let (s, v) = call(&app, "POST", "/kip", Some(body), None).await;
    let took = started.elapsed();
    assert_eq!(s, StatusCode::OK);
    let results = v["result"].as_array().expect("batch");
    assert_eq!(results[0]["error"]["code"], "KIP_4001", "{v}");
    // The budget named is the request's own, not the per-query default (10 s).
    let stopped = results[0]["error"]["message"].as_str().unwrap_or("");
    assert!(stopped.contains("time budget (700 ms)"), "{stopped}");
    let last = results.last().expect("some");
    assert_eq!(last["error"]["code"], "KIP_4001", "{v}");
    assert!(
        last["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("not run"),
        "{v}"
    );
    assert!(results.len() < 5, "the UPSERT must not have run: {v}");
    assert!(
        took < std::time::Duration::from_secs(5),
        "answered after {took:?}"
    );
    // Nothing is applied later either.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(count_named(&app, "Late").await, 0);
}

#[tokio::test]
async fn the_memory_health_report_has_its_route() {
    let n = nexus();
    kip_open::testing::blocking(|| {
        n.execute_json(
            &json!({"command": "UPSERT { CONCEPT ?p { {type: \"Person\", name: \"loose\"} } }"}),
            kip_engine::Access::ReadWrite,
        )
    });
    let app = router(
        n,
        HttpConfig {
            api_key: Some("k".into()),
            ..HttpConfig::default()
        },
    );
    let (s, _) = call(&app, "GET", "/memory/health", None, None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, v) = call(&app, "GET", "/memory/health", None, Some("k")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["orphans"]["count"], json!(1), "{v}");
    assert_eq!(v["orphans"]["sample"][0]["name"], json!("loose"));
    assert!(v["domains"].as_array().is_some_and(|d| d.len() == 4), "{v}");
}

#[tokio::test]
async fn the_brain_routes_answer_through_the_language_model() {
    use kip_brain::scripted::{kip_call, text, Script, ScriptedServer};
    // Without a model: a clear refusal.
    let app = router(nexus(), HttpConfig::default());
    let (s, v) = call(
        &app,
        "POST",
        "/brain/recall",
        Some(json!({"query": "x"})),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert!(
        v["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("--llm")),
        "{v}"
    );

    let server = ScriptedServer::start(Script {
        steps: vec![
            kip_call("a", &json!({"command": "UPSERT { CONCEPT ?p { {type: \"Person\", name: \"Lin\"} SET ATTRIBUTES { person_class: \"Human\", description: \"plays the cello\" } } } WITH METADATA { source: \"conversation\", author: \"$self\" }"})),
            text("Status: success\n\nSummary:\nStored Lin.\n\nWarnings:\n- None"),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "b", "type": "function", "function": {"name": "execute_kip_readonly", "arguments": json!({"command": "SEARCH CONCEPT \"cello\""}).to_string()}}]}),
        ],
        repeat: None,
    })
    .expect("server");
    let llm = Arc::new(kip_server::brain::Llm {
        client: kip_brain::ChatClient::new(
            kip_brain::LlmSpec::parse(&format!("{}#scripted", server.url)).expect("spec"),
            None,
        ),
        limits: kip_brain::LoopLimits::default(),
    });
    let n = nexus();
    let app = router(
        n.clone(),
        HttpConfig {
            llm: Some(llm.clone()),
            ..HttpConfig::default()
        },
    );
    let (s, v) = call(
        &app,
        "POST",
        "/brain/remember",
        Some(json!({"messages": [{"role": "user", "content": "Lin plays the cello"}]})),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["result"]["status"], "success");
    assert_eq!(v["result"]["writes"], 1);
    let (s, v) = call(
        &app,
        "POST",
        "/brain/recall",
        Some(json!({"nope": 1})),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    // The last scripted step, then the script runs out: the model's error ends recall.
    let (s, v) = call(
        &app,
        "POST",
        "/brain/recall",
        Some(json!({"query": "Who plays the cello?"})),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["result"]["status"], "failed", "{v}");
    assert_eq!(v["result"]["stop"], "llm_error");
    // A read-only server does not remember.
    let ro = router(
        n,
        HttpConfig {
            llm: Some(llm),
            read_only: true,
            ..HttpConfig::default()
        },
    );
    let (s, _) = call(
        &ro,
        "POST",
        "/brain/remember",
        Some(json!({"messages": [{"role": "user", "content": "x"}]})),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let names: Vec<String> = kip_server::mcp::brain_tools(true)
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["recall_memory"]);
    let names: Vec<String> = kip_server::mcp::brain_tools(false)
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["remember", "recall_memory"]);
}

#[tokio::test]
async fn list_logs_pages_the_calls_made_over_http() {
    let app = router(nexus(), HttpConfig::default());
    for name in ["a", "b", "c"] {
        let (s, _) = call(
            &app,
            "POST",
            "/kip",
            Some(json!({"command": upsert_person(name)})),
            None,
        )
        .await;
        assert_eq!(s, StatusCode::OK);
    }
    call(
        &app,
        "POST",
        "/kip",
        Some(json!({"method": "execute_kip_readonly", "params": {"command": "FIND(?x WHERE"}})),
        None,
    )
    .await;
    let (s, v) = call(
        &app,
        "POST",
        "/kip",
        Some(json!({"method": "list_logs", "params": {"limit": 2}})),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let page = v["result"].as_array().expect("records");
    assert_eq!(page.len(), 2);
    assert_eq!(page[0]["interface"], "http");
    assert_eq!(page[0]["method"], "execute_kip_readonly");
    assert_eq!(page[0]["error_code"], "KIP_1001");
    let cursor = v["next_cursor"].as_str().expect("cursor").to_string();
    let (_, v) = call(
        &app,
        "POST",
        "/kip",
        Some(json!({"method": "list_logs", "params": {"cursor": cursor, "limit": 100}})),
        None,
    )
    .await;
    let rest = v["result"].as_array().expect("records");
    assert_eq!(rest.len(), 2, "{v}");
    assert!(v["next_cursor"].is_null());
    // The defaults and the bounds of limit; JSON-RPC form too.
    let (_, v) = call(
        &app,
        "POST",
        "/kip",
        Some(json!({"method": "list_logs"})),
        None,
    )
    .await;
    assert_eq!(v["result"].as_array().map(Vec::len), Some(4));
    for bad in [json!(0), json!(101), json!("ten")] {
        let (_, v) = call(
            &app,
            "POST",
            "/kip",
            Some(json!({"method": "list_logs", "params": {"limit": bad}})),
            None,
        )
        .await;
        assert_eq!(v["error"]["code"], "KIP_1001", "{v}");
    }
    let (_, v) = call(
        &app,
        "POST",
        "/kip",
        Some(json!({"jsonrpc": "2.0", "id": 7, "method": "list_logs", "params": {"limit": 1}})),
        None,
    )
    .await;
    assert_eq!(v["id"], 7);
    assert_eq!(
        v["result"]["result"].as_array().map(Vec::len),
        Some(1),
        "{v}"
    );
}
