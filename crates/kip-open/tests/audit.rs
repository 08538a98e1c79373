//! The audit log: every audited call recorded with its outcome, pages newest first,
//! retention by count and age, and records kept across a reopen.

mod common;
use kip_engine::audit::AuditConfig;
use kip_engine::{Access, Budget, Nexus};
use kip_open::Open;
use serde_json::{json, Value};
use std::time::Duration;

fn call(n: &Nexus, cmd: &str) -> Value {
    n.execute_audited(
        &json!({"command": cmd}),
        Access::ReadWrite,
        &Budget::default(),
        "test",
    )
}

fn ids(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .map(|r| r["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn calls_are_recorded_and_paged_newest_first() {
    let n = common::nexus();
    call(
        &n,
        r#"UPSERT { CONCEPT ?p { {type: "Person", name: "Ann"} SET ATTRIBUTES { person_class: "Human" } } }"#,
    );
    call(
        &n,
        r#"FIND(?p.name) WHERE { ?p {type: "Person", name: "Ann"} }"#,
    );
    call(&n, "FIND(?x WHERE");
    n.execute_audited(
        &json!({"commands": ["DESCRIBE PRIMER", "FIND(?p) WHERE { ?p {type: \"Nope\"} }"], "dry_run": false}),
        Access::ReadOnly,
        &Budget::default(),
        "test",
    );
    n.memory()
        .call_audited("read_graph", &json!({}), "mcp")
        .expect("tool");
    let (all, next) = n.admin().audit().list(None, 10).expect("list");
    assert_eq!(next, None);
    assert_eq!(ids(&all), ["5", "4", "3", "2", "1"]);
    assert_eq!(all[4]["interface"], "test");
    assert_eq!(all[4]["method"], "execute_kip");
    assert_eq!(all[4]["outcome"], "ok");
    assert!(all[4]["command"]
        .as_str()
        .is_some_and(|c| c.starts_with("UPSERT")));
    assert!(all[4]["timestamp"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));
    assert!(all[4]["duration_ms"].as_f64().is_some());
    assert_eq!(all[2]["outcome"], "error");
    assert_eq!(all[2]["error_code"], "KIP_1001");
    assert_eq!(all[1]["method"], "execute_kip_readonly");
    assert_eq!(all[1]["commands_run"], 2);
    assert_eq!(all[1]["errors"], 1);
    assert_eq!(all[1]["commands"].as_array().map(Vec::len), Some(2));
    assert_eq!(all[0]["method"], "read_graph");
    assert_eq!(all[0]["interface"], "mcp");
    // Pages of two.
    let (p1, c1) = n.admin().audit().list(None, 2).expect("page");
    assert_eq!(ids(&p1), ["5", "4"]);
    let (p2, c2) = n.admin().audit().list(c1.as_deref(), 2).expect("page");
    assert_eq!(ids(&p2), ["3", "2"]);
    let (p3, c3) = n.admin().audit().list(c2.as_deref(), 2).expect("page");
    assert_eq!((ids(&p3), c3), (vec!["1".to_string()], None));
    assert!(n.admin().audit().list(Some("x"), 2).is_err());
    // Unaudited calls are not recorded.
    n.execute_json(&json!({"command": "DESCRIBE PRIMER"}), Access::ReadOnly);
    assert_eq!(n.admin().audit().list(None, 100).expect("list").0.len(), 5);
}

#[test]
fn retention_keeps_the_newest_by_count_and_by_age() {
    let n = common::nexus();
    n.admin().audit().configure(AuditConfig {
        max_entries: 5,
        max_age: None,
        ..AuditConfig::default()
    });
    for _ in 0..12 {
        call(&n, "DESCRIBE PRIMER");
    }
    let (kept, _) = n.admin().audit().list(None, 100).expect("list");
    assert_eq!(ids(&kept), ["12", "11", "10", "9", "8"]);
    n.admin().audit().configure(AuditConfig {
        max_entries: 1_000,
        max_age: Some(Duration::from_millis(600)),
        ..AuditConfig::default()
    });
    std::thread::sleep(Duration::from_millis(800));
    call(&n, "DESCRIBE PRIMER");
    call(&n, "DESCRIBE PRIMER");
    let (kept, _) = n.admin().audit().list(None, 100).expect("list");
    assert_eq!(ids(&kept), ["14", "13"]);
}

#[test]
fn records_survive_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let n = Nexus::open(dir.path()).expect("open");
        call(&n, "DESCRIBE PRIMER");
        call(
            &n,
            r#"UPSERT { CONCEPT ?p { {type: "Person", name: "Bo"} SET ATTRIBUTES { person_class: "Human" } } }"#,
        );
    }
    let n = Nexus::open(dir.path()).expect("reopen");
    call(&n, "DESCRIBE DOMAINS");
    let (all, _) = n.admin().audit().list(None, 10).expect("list");
    assert_eq!(
        ids(&all),
        ["3", "2", "1"],
        "numbering goes on after a reopen"
    );
    assert_eq!(all[2]["command"], "DESCRIBE PRIMER");
    assert_eq!(
        n.admin().check_integrity().expect("check"),
        Vec::<String>::new()
    );
}

/// Issue 45: one dry-run batch made an 822 KB record, and the log was bounded by count
/// only. A record is cut to fit with the request's size and digest; the log is bounded
/// in bytes, oldest first.
#[test]
fn records_and_the_log_are_bounded_in_bytes() {
    let n = common::nexus();
    let long = format!(
        "FIND(?p) WHERE {{ ?p {{type: \"Person\", name: \"{}\"}} }}",
        "x".repeat(8_000)
    );
    let commands: Vec<Value> = (0..100).map(|_| json!(long)).collect();
    n.execute_audited(
        &json!({"commands": commands, "dry_run": true}),
        Access::ReadWrite,
        &Budget::default(),
        "test",
    );
    let (records, _) = n.admin().audit().list(None, 1).expect("list");
    let r = &records[0];
    let size = r.to_string().len();
    assert!(size <= kip_engine::audit::MAX_RECORD, "{size} bytes");
    assert!(r["request_bytes"].as_u64().expect("size") > 800_000, "{r}");
    assert_eq!(r["request_crc32"].as_str().map(str::len), Some(8));
    assert_eq!(r["commands_run"], 100, "the outcome is kept whole");
    // A byte budget of 20 KB: the oldest records go first, the newest stay.
    n.admin().audit().configure(AuditConfig {
        max_bytes: 20_000,
        ..AuditConfig::default()
    });
    for _ in 0..200 {
        call(&n, "DESCRIBE PRIMER");
    }
    n.admin().audit().flush().expect("flush");
    let mut total = 0usize;
    let mut cursor = None;
    let mut count = 0;
    loop {
        let (page, next) = n
            .admin()
            .audit()
            .list(cursor.as_deref(), 100)
            .expect("list");
        for r in &page {
            total += r.to_string().len();
            count += 1;
        }
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert!(total <= 20_000, "{total} bytes in {count} records");
    assert!(count >= 20, "the newest records stay ({count})");
    let (newest, _) = n.admin().audit().list(None, 1).expect("list");
    assert_eq!(newest[0]["id"], "201", "{}", newest[0]);
}

/// Issue 45: parameters (which may hold personal data or secrets) stayed in the log after
/// the data left the graph. Records older than `params_max_age` lose their parameters
/// and arguments; command texts and outcomes stay.
#[test]
fn old_records_lose_their_parameters() {
    let n = common::nexus();
    n.admin().audit().configure(AuditConfig {
        params_max_age: Some(Duration::from_millis(300)),
        ..AuditConfig::default()
    });
    n.execute_audited(
        &json!({"command": "UPSERT { CONCEPT ?p { {type: \"Person\", name: :name} } }", "parameters": {"name": "Secret Sam"}}),
        Access::ReadWrite,
        &Budget::default(),
        "test",
    );
    n.memory().call_audited(
        "create_entities",
        &json!({"entities": [{"name": "Private Pat", "entityType": "person", "observations": ["lives at 1 Elm St"]}]}),
        "test",
    )
    .expect("tool");
    std::thread::sleep(Duration::from_millis(500));
    call(&n, "DESCRIBE PRIMER");
    n.admin().audit().purge_old_parameters().expect("purge");
    let (records, _) = n.admin().audit().list(None, 10).expect("list");
    let text = serde_json::to_string(&records).expect("json");
    assert!(!text.contains("Secret Sam"), "{text}");
    assert!(!text.contains("Elm St"), "{text}");
    let old: Vec<&Value> = records
        .iter()
        .filter(|r| r["parameters_dropped"] == json!(true))
        .collect();
    assert_eq!(old.len(), 2, "{text}");
    assert!(old
        .iter()
        .any(|r| r["command"].as_str().is_some_and(|c| c.contains("UPSERT"))));
    assert!(old.iter().all(|r| r["outcome"] == "ok"));
}

/// §60.3 (issue 48): a PURGE destroys the element's content in the audit log too: the
/// records whose command texts or parameters held it lose them (they keep their time,
/// method and outcome and say `scrubbed`); records about other things are untouched.
#[test]
fn a_purge_scrubs_its_content_from_the_audit_log() {
    let n = common::nexus();
    // Request-level parameters are what the audit record keeps.
    let kip2 = |cmd: &str, params: Value| {
        n.execute_audited(
            &json!({"kip": "2.0", "parameters": params, "operations": [{"command": cmd}]}),
            Access::ReadWrite,
            &Budget::default(),
            "test",
        )
    };
    let r = kip2(
        r#"CREATE EVIDENCE ?e { SET FIELDS { evidence_class: "user_statement", payload: "my \"secret\" diary" } }"#,
        json!({}),
    );
    let e = r["results"][0]["result"]["handles"]["e"].clone();
    kip2(
        "FIND(?e) WHERE { ?e EVIDENCE {payload: :p} }",
        json!({"p": "my \"secret\" diary"}),
    );
    kip2(
        r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Unrelated" }"#,
        json!({}),
    );
    let r = kip2(r#"PURGE :e CONFIRM "PURGE""#, json!({"e": e}));
    assert_eq!(r["status"], "succeeded", "{r}");
    let (all, _) = n.admin().audit().list(None, 100).expect("list");
    let text = serde_json::to_string(&all).expect("json");
    assert!(!text.contains("diary"), "{text}");
    let scrubbed = all.iter().filter(|r| r["scrubbed"] == "purge").count();
    assert_eq!(scrubbed, 2, "{text}");
    assert!(
        text.contains("Unrelated"),
        "other records keep their commands"
    );
    // Nothing is left pending.
    let pending = n
        .read(|g| Ok(g.meta("kip2.audit_scrub_pending")?))
        .expect("read");
    assert!(pending.is_none_or(|p| p.is_empty()));
}

/// Issue 48: a purge removes the content from every place this project keeps it: the
/// graph (reads by name and id), the text index (SEARCH), the past (AS OF, HISTORY),
/// the audit log, and what an export produces afterwards.
#[test]
fn a_purge_leaves_its_content_in_no_place() {
    let n = common::nexus();
    let kip2 = |cmd: &str, params: Value| {
        n.execute_audited(
            &json!({"kip": "2.0", "parameters": params, "operations": [{"command": cmd}]}),
            Access::ReadWrite,
            &Budget::default(),
            "test",
        )
    };
    let secret = "Zanzibarine quokkas";
    let r = kip2(
        r#"CREATE CONCEPT ?c { TYPE "Person" NAME :name SET ATTRIBUTES { description: :d } }"#,
        json!({"name": secret, "d": "a Zanzibarine quokka keeper"}),
    );
    let c = r["results"][0]["result"]["handles"]["c"].clone();
    // A description set and replaced: only the past holds the first one.
    kip2(
        r#"UPDATE :c SET ATTRIBUTES { description: "feeds the marsupial colony" }"#,
        json!({"c": c}),
    );
    kip2(
        r#"UPDATE :c SET ATTRIBUTES { description: "keeps Zanzibarine quokkas at home" }"#,
        json!({"c": c}),
    );
    let found = kip2(r#"SEARCH CONCEPT "Zanzibarine" MODE "keyword""#, json!({}));
    assert!(
        found.to_string().contains(secret),
        "indexed before: {found}"
    );
    let r = kip2(r#"PURGE :c CONFIRM "PURGE""#, json!({"c": c}));
    assert_eq!(r["status"], "succeeded", "{r}");
    let everywhere = [
        kip2(
            "FIND(?c) WHERE { ?c CONCEPT {name: :n} }",
            json!({"n": secret}),
        ),
        kip2("FIND(?c) WHERE { ?c CONCEPT {id: :c} }", json!({"c": c})),
        kip2(r#"SEARCH CONCEPT "Zanzibarine" MODE "keyword""#, json!({})),
        kip2(
            "FIND(?c.name, ?c.attributes) WHERE { ?c CONCEPT {id: :c} } AS OF SEQ 1",
            json!({"c": c}),
        ),
        kip2(
            "FIND(?c.name, ?c.attributes) WHERE { ?c CONCEPT {id: :c} } AS OF SEQ 2",
            json!({"c": c}),
        ),
        kip2("HISTORY ELEMENT :c", json!({"c": c})),
        kip2("HISTORY SPACE", json!({})),
    ];
    let holds = |text: &str| text.contains("Zanzibarine") || text.contains("marsupial");
    for r in &everywhere {
        assert!(!holds(&r.to_string()), "{r}");
    }
    let export = n.admin().export_capsule().expect("export");
    assert!(!holds(&export), "export");
    let dump = n.admin().dump().expect("dump").to_string();
    assert!(!holds(&dump), "dump");
    // The audit records made up to the purge hold none of its content strings (the
    // checks above, made after it, name what they look for themselves).
    let (all, _) = n.admin().audit().list(None, 100).expect("list");
    let purge_at = all
        .iter()
        .find(|r| {
            r["commands"][0]
                .as_str()
                .is_some_and(|c| c.starts_with("PURGE"))
        })
        .and_then(|r| r["id"].as_str()?.parse::<u64>().ok())
        .expect("the purge is recorded");
    let before: Vec<&Value> = all
        .iter()
        .filter(|r| r["id"].as_str().and_then(|i| i.parse::<u64>().ok()) < Some(purge_at))
        .collect();
    let text = serde_json::to_string(&before).expect("json");
    for content in [
        secret,
        "a Zanzibarine quokka keeper",
        "feeds the marsupial colony",
        "keeps Zanzibarine quokkas at home",
    ] {
        assert!(!text.contains(content), "{content}: {text}");
    }
}
