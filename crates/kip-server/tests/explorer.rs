//! The explorer's HTTP side: the page and its files (public, strict CSP, offline), the
//! data routes behind the API key, the concept view, search, the console's write rules
//! and the audit log filters. The page itself runs in Chromium in
//! crates/kip-cli/tests/explorer_browser.rs.

use axum::body::{to_bytes, Body};
use axum::http::{Request, StatusCode};
use kip_engine::Nexus;
use kip_server::http::{router, HttpConfig};
use serde_json::{json, Value};
use std::sync::Arc;
use tower::ServiceExt;

const KEY: &str = "k3y";

fn app(api_key: Option<&str>, read_only: bool) -> (Arc<Nexus>, axum::Router) {
    let n = Arc::new(kip_open::testing::nexus().expect("nexus"));
    let r = router(
        n.clone(),
        HttpConfig {
            api_key: api_key.map(String::from),
            read_only,
            ..HttpConfig::default()
        },
    );
    (n, r)
}

async fn raw(
    app: &axum::Router,
    req: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let resp = app.clone().oneshot(req).await.expect("response");
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = to_bytes(resp.into_body(), usize::MAX).await.expect("body");
    (status, headers, bytes.to_vec())
}

async fn get(app: &axum::Router, path: &str, key: Option<&str>) -> (StatusCode, Value) {
    let mut req = Request::builder().uri(path);
    if let Some(k) = key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    let (s, _, b) = raw(app, req.body(Body::empty()).expect("request")).await;
    (s, serde_json::from_slice(&b).unwrap_or(Value::Null))
}

async fn post(
    app: &axum::Router,
    path: &str,
    body: Value,
    key: Option<&str>,
) -> (StatusCode, Value) {
    let mut req = Request::builder()
        .method("POST")
        .uri(path)
        .header("content-type", "application/json");
    if let Some(k) = key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    let (s, _, b) = raw(
        app,
        req.body(Body::from(body.to_string())).expect("request"),
    )
    .await;
    (s, serde_json::from_slice(&b).unwrap_or(Value::Null))
}

fn seed(n: &Nexus) {
    let r = kip_open::testing::blocking(|| {
        n.execute_json(
        &json!({"commands": [
            "UPSERT { CONCEPT ?t { {type: \"$ConceptType\", name: \"Project\"} SET ATTRIBUTES { description: \"A project.\" } } CONCEPT ?p { {type: \"$PropositionType\", name: \"works_on\"} SET ATTRIBUTES { description: \"works on\", subject_types: [\"*\"], object_types: [\"*\"] } } CONCEPT ?s { {type: \"$PropositionType\", name: \"stated_by\"} SET ATTRIBUTES { description: \"who said it\", subject_types: [\"*\"], object_types: [\"*\"] } } }",
            "UPSERT { CONCEPT ?a { {type: \"Project\", name: \"Apollo\"} } CONCEPT ?x { {type: \"Person\", name: \"Alice\"} SET ATTRIBUTES { role: \"engineer\" } SET PROPOSITIONS { (\"works_on\", ?a) } } CONCEPT ?b { {type: \"Person\", name: \"Bob\"} SET PROPOSITIONS { (\"works_on\", ?a) } } } WITH METADATA { source: \"chat\", confidence: 0.9 }",
            "UPSERT { PROPOSITION ?f { ({type: \"Person\", name: \"Alice\"}, \"works_on\", {type: \"Project\", name: \"Apollo\"}) } PROPOSITION ?h { (?f, \"stated_by\", {type: \"Person\", name: \"Bob\"}) } }"
        ]}),
        kip_engine::Access::ReadWrite,
    )
    });
    assert!(!r.has_error(), "{}", r.to_json());
}

#[tokio::test]
async fn the_page_and_its_files_are_served_without_the_key_with_a_strict_csp() {
    let (_, app) = app(Some(KEY), false);
    for (path, mime, needle) in [
        ("/", "text/html", "kip-nexus explorer"),
        ("/explorer/app.js", "text/javascript", "textContent"),
        (
            "/explorer/app.css",
            "text/css",
            "__________cytoscape_container",
        ),
        (
            "/explorer/vendor/cytoscape.min.js",
            "text/javascript",
            "cytoscape",
        ),
        (
            "/explorer/licenses.txt",
            "text/plain",
            "The Cytoscape Consortium",
        ),
        ("/favicon.ico", "image/svg+xml", "<svg"),
    ] {
        let req = Request::builder()
            .uri(path)
            .body(Body::empty())
            .expect("request");
        let (s, h, body) = raw(&app, req).await;
        assert_eq!(s, StatusCode::OK, "{path}");
        let ct = h["content-type"].to_str().expect("ascii");
        assert!(ct.starts_with(mime), "{path}: {ct}");
        let csp = h["content-security-policy"].to_str().expect("ascii");
        assert!(
            csp.contains("script-src 'self'") && csp.contains("default-src 'none'"),
            "{csp}"
        );
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert_eq!(h["x-content-type-options"], "nosniff");
        let text = String::from_utf8_lossy(&body);
        assert!(text.contains(needle), "{path} lacks {needle}");
    }
    // The page loads nothing from elsewhere (it works offline).
    let req = Request::builder()
        .uri("/")
        .body(Body::empty())
        .expect("request");
    let (_, _, body) = raw(&app, req).await;
    let html = String::from_utf8_lossy(&body);
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "{html}"
    );
    assert!(!html.contains("<script>"), "no inline script");
}

#[tokio::test]
async fn the_page_answers_only_loopback_host_names() {
    let (_, app) = app(None, false);
    let req = Request::builder()
        .uri("/")
        .header("host", "attacker.example")
        .body(Body::empty())
        .expect("request");
    let (s, _, _) = raw(&app, req).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let req = Request::builder()
        .uri("/explorer/api/config")
        .header("host", "localhost:8080")
        .body(Body::empty())
        .expect("request");
    let (s, _, _) = raw(&app, req).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn config_tells_the_page_what_it_may_do() {
    for (key, ro, auth, writes) in [
        (Some(KEY), false, true, true),
        (Some(KEY), true, true, false),
        (None, false, false, false),
    ] {
        let (_, app) = app(key, ro);
        let (s, v) = get(&app, "/explorer/api/config", None).await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(v["auth_required"], auth, "{v}");
        assert_eq!(v["read_only"], ro, "{v}");
        assert_eq!(v["writes_enabled"], writes, "{v}");
    }
}

#[tokio::test]
async fn every_data_route_needs_the_key() {
    let (n, app) = app(Some(KEY), false);
    seed(&n);
    for path in [
        "/explorer/api/overview",
        "/explorer/api/concept?type=Person&name=Alice",
        "/explorer/api/search?q=alice",
        "/explorer/api/logs",
    ] {
        let (s, _) = get(&app, path, None).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{path}");
        let (s, v) = get(&app, path, Some(KEY)).await;
        assert_eq!(s, StatusCode::OK, "{path}: {v}");
    }
    let (s, _) = post(
        &app,
        "/explorer/api/kip",
        json!({"command": "DESCRIBE PRIMER"}),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_overview_has_the_primer_and_types_with_counts() {
    let (n, app) = app(None, false);
    seed(&n);
    let (s, v) = get(&app, "/explorer/api/overview", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["primer"]["identity"]["name"], "$self");
    assert!(v["primer"]["domain_map"].is_array());
    let count = |key: &str, name: &str| {
        v[key]
            .as_array()
            .and_then(|a| a.iter().find(|t| t["name"] == name))
            .map(|t| t["count"].clone())
    };
    // $self, $system, Alice, Bob.
    assert_eq!(count("concept_types", "Person"), Some(json!(4)));
    assert_eq!(count("concept_types", "Project"), Some(json!(1)));
    assert_eq!(count("proposition_types", "works_on"), Some(json!(2)));
    assert_eq!(count("proposition_types", "stated_by"), Some(json!(1)));
    assert!(v["totals"]["concepts"].as_u64().is_some_and(|c| c >= 4));
}

#[tokio::test]
async fn a_concept_page_has_both_directions_higher_order_and_domains() {
    let (n, app) = app(None, false);
    seed(&n);
    let (s, v) = get(&app, "/explorer/api/concept?type=Person&name=Alice", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["concept"]["attributes"]["role"], "engineer");
    assert_eq!(v["concept"]["metadata"]["source"], "chat");
    assert!(v["concept"]["metadata"]["_version"].is_number());
    assert_eq!(v["outgoing"]["total"], 1);
    assert_eq!(v["outgoing"]["items"][0]["link"]["predicate"], "works_on");
    assert_eq!(v["outgoing"]["items"][0]["other"]["name"], "Apollo");
    assert_eq!(v["about"][0]["statement"]["predicate"], "stated_by");
    assert_eq!(v["about"][0]["other"]["name"], "Bob");
    // The KIP 2.0 view of its facts: the founding assertion of the 1.x link, believed.
    let claim = v["claims"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["predicate"] == "works_on"))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(
        (
            claim["end"].clone(),
            claim["stance"].clone(),
            claim["belief"].clone()
        ),
        (json!("subject"), json!("support"), json!("accepted")),
        "{v}"
    );
    // By id, and from the other end.
    let id = v["concept"]["id"].as_str().expect("id").to_string();
    let (_, again) = get(&app, &format!("/explorer/api/concept?id={id}"), None).await;
    assert_eq!(again["concept"]["name"], "Alice");
    let (_, apollo) = get(
        &app,
        "/explorer/api/concept?type=Project&name=Apollo&limit=1",
        None,
    )
    .await;
    assert_eq!(apollo["incoming"]["total"], 2, "{apollo}");
    assert_eq!(
        apollo["incoming"]["items"].as_array().map(Vec::len),
        Some(1),
        "limit applies"
    );
    // Stored strings are data, never part of a command.
    let (s, v) = get(
        &app,
        "/explorer/api/concept?type=Person&name=%22%7D%20%7D%20DELETE",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    assert_eq!(v["error"]["code"], "KIP_3002");
    let (s, _) = get(&app, "/explorer/api/concept?type=NoSuchType&name=x", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    for bad in [
        "/explorer/api/concept",
        "/explorer/api/concept?type=Person&name=Alice&limit=0",
        "/explorer/api/concept?type=Person&name=Alice&limit=100000",
    ] {
        let (s, v) = get(&app, bad, None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}: {v}");
        assert!(v["error"]["hint"].is_string(), "{v}");
    }
}

#[tokio::test]
async fn a_type_is_listed_a_page_at_a_time() {
    let (n, app) = app(None, false);
    seed(&n);
    let (s, p1) = get(&app, "/explorer/api/list?type=Person&limit=3", None).await;
    assert_eq!(s, StatusCode::OK, "{p1}");
    assert_eq!(p1["total"], 4);
    assert_eq!(p1["items"].as_array().map(Vec::len), Some(3));
    let cursor = p1["next_cursor"].as_str().expect("a next page");
    let (_, p2) = get(
        &app,
        &format!("/explorer/api/list?type=Person&limit=3&cursor={cursor}"),
        None,
    )
    .await;
    assert_eq!(p2["items"].as_array().map(Vec::len), Some(1), "{p2}");
    assert!(p2["next_cursor"].is_null());
    let mut names: Vec<String> = p1["items"]
        .as_array()
        .into_iter()
        .chain(p2["items"].as_array())
        .flatten()
        .map(|c| c["name"].as_str().unwrap_or("").to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["$self", "$system", "Alice", "Bob"]);
    let (s, _) = get(&app, "/explorer/api/list", None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn search_gives_scores_and_proposition_endpoints() {
    let (n, app) = app(None, false);
    seed(&n);
    let (s, v) = get(&app, "/explorer/api/search?q=alice&limit=5", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["hits"][0]["name"], "Alice");
    assert!(v["hits"][0]["metadata"]["_score"].is_number());
    let (_, v) = get(&app, "/explorer/api/search?q=works&kind=proposition", None).await;
    let hit = &v["hits"][0];
    assert_eq!(hit["predicate"], "works_on", "{v}");
    assert!(hit["subject_element"]["name"].is_string(), "{v}");
    assert_eq!(hit["object_element"]["name"], "Apollo");
    let (_, v) = get(&app, "/explorer/api/search?q=alice&type=Project", None).await;
    assert_eq!(v["hits"], json!([]), "WITH TYPE applies");
    let (s, v) = get(&app, "/explorer/api/search?q=alice&mode=bogus", None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let (s, _) = get(&app, "/explorer/api/search?q=", None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_console_writes_only_with_a_key_and_not_read_only() {
    let upsert = json!({"command": "UPSERT { CONCEPT ?p { {type: \"Person\", name: \"Zed\"} } }", "write": true});
    let zeds = |n: &Nexus| {
        kip_open::testing::blocking(|| {
            n.execute_json(
                &json!({"command": "FIND(COUNT(?p)) WHERE { ?p {type: \"Person\", name: \"Zed\"} }"}),
                kip_engine::Access::ReadOnly,
            )
            .to_json()
            .to_string()
        })
    };
    // No key: the explorer may not write.
    let (n, open) = app(None, false);
    let (s, v) = post(&open, "/explorer/api/kip", upsert.clone(), None).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "KIP_3004");
    assert!(v["error"]["hint"]
        .as_str()
        .is_some_and(|h| h.contains("--api-key")));
    assert!(zeds(&n).contains("\"result\":0"));
    // Read-only: neither.
    let (n, ro) = app(Some(KEY), true);
    let (s, _) = post(&ro, "/explorer/api/kip", upsert.clone(), Some(KEY)).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert!(zeds(&n).contains("\"result\":0"));
    // With the key: a read by default refuses KML; an explicit write applies.
    let (n, keyed) = app(Some(KEY), false);
    let mut read = upsert.clone();
    read["write"] = json!(false);
    let (s, v) = post(&keyed, "/explorer/api/kip", read, Some(KEY)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["error"]["code"], "KIP_3004", "{v}");
    assert!(zeds(&n).contains("\"result\":0"));
    let (_, v) = post(&keyed, "/explorer/api/kip", upsert, Some(KEY)).await;
    assert!(v["result"]["upsert_concept_nodes"].is_array(), "{v}");
    assert!(zeds(&n).contains("\"result\":1"));
    // Errors carry their position.
    let (_, v) = post(
        &keyed,
        "/explorer/api/kip",
        json!({"command": "FIND(?p)\nWHERE {\n  ?p {type: \"Person\"\n}"}),
        Some(KEY),
    )
    .await;
    assert_eq!(v["error"]["code"], "KIP_1001");
    assert_eq!(v["error"]["line"], 4);
    // The console's calls are in the audit log, as the explorer's.
    let (_, logs) = get(
        &keyed,
        "/explorer/api/logs?interface=explorer&limit=10",
        Some(KEY),
    )
    .await;
    let records = logs["result"].as_array().expect("records");
    assert_eq!(records.len(), 3, "{logs}");
    assert!(records.iter().all(|r| r["interface"] == "explorer"));
}

#[tokio::test]
async fn the_log_filters_by_interface_outcome_writes_and_text() {
    let (_, app) = app(None, false);
    for body in [
        json!({"command": "UPSERT { CONCEPT ?p { {type: \"Person\", name: \"Ann\"} } }"}),
        json!({"command": "FIND(?p) WHERE { ?p {type: \"Person\", name: \"Ann\"} }"}),
        json!({"command": "FIND(?p WHERE"}),
        json!({"command": "UPSERT { CONCEPT ?p { {type: \"Person\", name: \"Dry\"} } }", "dry_run": true}),
    ] {
        post(&app, "/kip", body, None).await;
    }
    let ids = |v: &Value| -> Vec<String> {
        v["result"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|r| r["command"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let (_, all) = get(&app, "/explorer/api/logs", None).await;
    assert_eq!(ids(&all).len(), 4, "{all}");
    let (_, writes) = get(&app, "/explorer/api/logs?writes=1", None).await;
    assert_eq!(
        ids(&writes),
        vec!["UPSERT { CONCEPT ?p { {type: \"Person\", name: \"Ann\"} } }"],
        "dry runs and reads are not writes"
    );
    let (_, errors) = get(&app, "/explorer/api/logs?outcome=error", None).await;
    assert_eq!(ids(&errors), vec!["FIND(?p WHERE"]);
    let (_, text) = get(&app, "/explorer/api/logs?text=dry", None).await;
    assert_eq!(ids(&text).len(), 1);
    let (_, none) = get(&app, "/explorer/api/logs?interface=mcp", None).await;
    assert_eq!(ids(&none).len(), 0);
    // Paging: one per page, newest first, the cursor goes on.
    let (_, p1) = get(&app, "/explorer/api/logs?limit=1", None).await;
    let cursor = p1["next_cursor"].as_str().expect("cursor").to_string();
    let (_, p2) = get(
        &app,
        &format!("/explorer/api/logs?limit=1&cursor={cursor}"),
        None,
    )
    .await;
    assert_eq!(
        ids(&p1),
        vec!["UPSERT { CONCEPT ?p { {type: \"Person\", name: \"Dry\"} } }"]
    );
    assert_eq!(ids(&p2), vec!["FIND(?p WHERE"]);
    let (s, _) = get(&app, "/explorer/api/logs?limit=1000", None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    // A day: since inclusive, until exclusive, as dates or timestamps (UTC).
    let ts = all["result"][0]["timestamp"]
        .as_str()
        .expect("timestamp")
        .to_string();
    let day = &ts[..10];
    let (_, today) = get(&app, &format!("/explorer/api/logs?since={day}"), None).await;
    assert_eq!(ids(&today).len(), 4);
    let (_, before) = get(&app, &format!("/explorer/api/logs?until={day}"), None).await;
    assert_eq!(ids(&before).len(), 0);
    let (_, later) = get(&app, "/explorer/api/logs?since=2999-01-01", None).await;
    assert_eq!(ids(&later).len(), 0);
    assert!(
        later["next_cursor"].is_null(),
        "older records are not scanned: {later}"
    );
}

#[tokio::test]
async fn a_log_bound_that_is_not_a_date_is_a_400_naming_it() {
    let (_, app) = app(None, false);
    post(&app, "/kip", json!({"command": "DESCRIBE PRIMER"}), None).await;
    for (param, value) in [
        ("since", "garbage"),
        ("until", "garbage"),
        ("since", "2026-13-45"),
    ] {
        let (s, v) = get(&app, &format!("/explorer/api/logs?{param}={value}"), None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{param}={value}: {v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(param) && message.contains(value),
            "{message}"
        );
        assert!(v["error"]["hint"]
            .as_str()
            .unwrap_or_default()
            .contains("2026-01-02"));
    }
    // A timestamp to the second with a zone is read as such (a record made this second
    // is kept, although its text with milliseconds sorts before the bare `...05Z`).
    let (_, all) = get(&app, "/explorer/api/logs", None).await;
    let ts = all["result"][0]["timestamp"].as_str().expect("timestamp");
    let second = format!("{}Z", &ts[..19]);
    let (s, v) = get(&app, &format!("/explorer/api/logs?since={second}"), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["result"].as_array().map(Vec::len), Some(1), "{v}");
}

#[tokio::test]
async fn the_console_runs_a_commands_batch() {
    let (_, app) = app(None, false);
    let (s, v) = post(
        &app,
        "/explorer/api/kip",
        json!({"commands": ["DESCRIBE PRIMER", "FIND(?p.name) WHERE { ?p {type: \"Person\", name: \"$self\"} }"]}),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let results = v["result"].as_array().expect("a batch answer");
    assert_eq!(results.len(), 2, "{v}");
    assert!(results.iter().all(|r| r.get("error").is_none()), "{v}");
    // Neither key: the message does not claim one that is not there.
    let (_, v) = post(&app, "/explorer/api/kip", json!({"write": false}), None).await;
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("neither"), "{v}");
    assert!(!message.contains("it has"), "{v}");
}

/// A sleep cycle writes a statement per step as `$system` (interface `sleep`): the
/// log view can leave them out, so the calls made by agents and people are not lost
/// among them.
#[tokio::test]
async fn the_log_can_hide_the_sleep_cycle() {
    let (n, app) = app(None, false);
    post(
        &app,
        "/kip",
        json!({"command": "UPSERT { CONCEPT ?p { {type: \"Person\", name: \"Ann\"} } }"}),
        None,
    )
    .await;
    // Off the runtime's threads: the PostgreSQL backend's client blocks.
    kip_open::testing::blocking(|| n.brain().sleep(&kip_engine::brain::SleepOptions::default()))
        .expect("a sleep cycle");
    let interfaces = |v: &Value| -> Vec<String> {
        v["result"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|r| r["interface"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let (_, all) = get(&app, "/explorer/api/logs", None).await;
    assert!(interfaces(&all).iter().any(|i| i == "sleep"), "{all}");
    let (_, hidden) = get(&app, "/explorer/api/logs?hide_sleep=1", None).await;
    assert_eq!(interfaces(&hidden), vec!["http"], "{hidden}");
}
