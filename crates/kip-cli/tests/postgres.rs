//! The PostgreSQL backend from the outside: `--data postgres://...` for every command,
//! a memory moved between a directory and a database both ways, and many `kip serve`
//! processes on one database, killed with SIGKILL while clients write, without one
//! acknowledged write lost or one duplicate key.
//!
//! These need a PostgreSQL server: `KIP_TEST_PG_URL` (scripts/test.sh starts a
//! throwaway cluster with scripts/pg-test-cluster.sh and sets it). Each test works in a
//! schema of its own.
//!
//! One file (about 830 lines) for the suite that only runs against a live PostgreSQL:
//! its tests share the helpers at the top (a fresh schema, kip processes, statements in
//! process, a plain session for changes made behind kip's back).

use kip_engine::{Access, Nexus};
use kip_open::Open;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NEEDS: &str =
    "needs PostgreSQL: KIP_TEST_PG_URL (scripts/test.sh starts a throwaway cluster)";

/// A URL of a fresh, empty schema in the test database.
fn fresh_url(prefix: &str) -> String {
    let url = std::env::var("KIP_TEST_PG_URL").unwrap_or_else(|_| panic!("{NEEDS}"));
    kip_open::postgres::scratch_schema(&url, prefix).expect("a schema of its own")
}

fn kip(data: &str, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kip"))
        .args(["--data", data, "-q"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kip");
    if let Some(mut input) = child.stdin.take() {
        if let Some(s) = stdin {
            input.write_all(s.as_bytes()).expect("stdin");
        }
    }
    let out = child.wait_with_output().expect("kip output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn exec_json(data: &str, cmd: &str) -> Value {
    let req = json!({ "command": cmd }).to_string();
    let (_, out, err) = kip(data, &["exec", "--json", "-"], Some(&req));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"))
}

/// A statement through `n`, in process, as `execute_kip` runs it.
fn run_on(n: &Nexus, cmd: &str) -> Value {
    n.execute_json(&json!({ "command": cmd }), Access::ReadWrite)
        .to_json()
}

/// [`run_on`] for a statement that must succeed: its result.
fn ok_on(n: &Nexus, cmd: &str) -> Value {
    let r = run_on(n, cmd);
    assert!(r.get("error").is_none(), "{cmd}: {r}");
    r["result"].clone()
}

/// The schema a [`fresh_url`] names, and a plain session on the test database (for
/// changes made behind kip's back).
fn raw_session(url: &str) -> (String, postgres::Client) {
    let schema = url
        .rsplit("search_path%3D")
        .next()
        .expect("schema in the URL")
        .to_string();
    let base = std::env::var("KIP_TEST_PG_URL").expect("url");
    let db = postgres::Client::connect(&base, postgres::NoTls).expect("a session");
    (schema, db)
}

#[test]
#[ignore = "needs PostgreSQL (KIP_TEST_PG_URL)"]
fn every_command_takes_a_database_url_and_a_memory_moves_both_ways() {
    let url = fresh_url("cli");
    let w = exec_json(
        &url,
        r#"UPSERT { CONCEPT ?a { {type: "Person", name: "Ada"} SET ATTRIBUTES { role: "engineer", rank: 7 } } }"#,
    );
    assert!(w.get("error").is_none(), "{w}");
    // Another process reads what this one wrote.
    let r = exec_json(
        &url,
        r#"FIND(?p.attributes.rank) WHERE { ?p {type: "Person", name: "Ada"} }"#,
    );
    assert_eq!(r["result"], json!([7]), "{r}");
    let (ok, out, err) = kip(&url, &["check"], None);
    assert!(ok, "{out}{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).expect("json")["result"]["ok"],
        json!(true)
    );

    // Directory -> database -> directory: the exports are identical.
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("n");
    let data = data.to_str().expect("utf-8 path");
    let w = exec_json(
        data,
        r#"UPSERT {
            CONCEPT ?t { {type: "$ConceptType", name: "Tool"} SET ATTRIBUTES { description: "A tool" } }
            CONCEPT ?u { {type: "$PropositionType", name: "uses"} SET ATTRIBUTES { description: "uses", subject_types: ["Person"], object_types: ["Tool"] } }
        }"#,
    );
    assert!(w.get("error").is_none(), "{w}");
    let w = exec_json(
        data,
        r#"UPSERT {
            CONCEPT ?b { {type: "Person", name: "Bea"} SET ATTRIBUTES { note: "zero\u0000byte", rank: 3 } }
            CONCEPT ?h { {type: "Tool", name: "Hammer"} }
            PROPOSITION ?l { (?b, "uses", ?h) } WITH METADATA { confidence: 0.9 }
            PROPOSITION ?m { (?l, "uses", ?h) }
        }"#,
    );
    assert!(w.get("error").is_none(), "{w}");
    let a = dir.path().join("a.kip");
    let b = dir.path().join("b.kip");
    let c = dir.path().join("c.kip");
    let (a, b, c) = (
        a.to_str().expect("path"),
        b.to_str().expect("path"),
        c.to_str().expect("path"),
    );
    let (ok, _, err) = kip(data, &["export", "-o", a], None);
    assert!(ok, "{err}");
    let db = fresh_url("move");
    let (ok, out, err) = kip(&db, &["import", a], None);
    assert!(ok, "{out}{err}");
    let (ok, _, err) = kip(&db, &["export", "-o", b], None);
    assert!(ok, "{err}");
    let back = dir.path().join("back");
    let back = back.to_str().expect("path");
    let (ok, _, err) = kip(back, &["import", b], None);
    assert!(ok, "{err}");
    let (ok, _, err) = kip(back, &["export", "-o", c], None);
    assert!(ok, "{err}");
    let text = |p: &str| std::fs::read_to_string(p).expect("export");
    assert_eq!(text(a), text(b), "directory -> database changed the export");
    assert_eq!(text(b), text(c), "database -> directory changed the export");
    assert!(text(a).contains("Hammer"));
    let (ok, out, _) = kip(&db, &["check"], None);
    assert!(ok, "{out}");
}

/// POSTs `{"command": cmd}` to a server's `/kip`; `None` when the server is gone.
fn post(port: u16, cmd: &str) -> Option<Value> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let text = json!({ "command": cmd }).to_string();
    let req = format!(
        "POST /kip HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    serde_json::from_str(out.split("\r\n\r\n").nth(1)?).ok()
}

/// `GET path` on a server; the JSON body.
fn get(port: u16, path: &str) -> Value {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    serde_json::from_str(out.split("\r\n\r\n").nth(1).expect("body")).expect("json body")
}

fn start_server(url: &str, port: u16) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_kip"))
        .args(["--data", url, "serve", "--no-prewarm", "--http"])
        .arg(format!("127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start kip serve");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "kip serve did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

const SERVERS: usize = 4;
const CLIENTS_PER_SERVER: usize = 16;
const SHARED_KEYS: usize = 24;

#[test]
#[ignore = "needs PostgreSQL (KIP_TEST_PG_URL)"]
fn four_servers_on_one_database_lose_no_acknowledged_write_when_killed() {
    let url = fresh_url("many");
    let w = exec_json(
        &url,
        r#"UPSERT {
            CONCEPT ?t { {type: "$ConceptType", name: "Item"} SET ATTRIBUTES { description: "A test item" } }
            CONCEPT ?n { {type: "$PropositionType", name: "near"} SET ATTRIBUTES { description: "near", subject_types: ["Item"], object_types: ["Item"] } }
        }"#,
    );
    assert!(w.get("error").is_none(), "{w}");
    let ports: Vec<u16> = (0..SERVERS).map(|_| free_port()).collect();
    let servers: Arc<Mutex<Vec<Child>>> = Arc::new(Mutex::new(
        ports.iter().map(|&p| start_server(&url, p)).collect(),
    ));
    // Each server reports the database it uses (without a password).
    let health = get(ports[0], "/health");
    assert_eq!(health["status"], json!("ok"), "{health}");
    assert_eq!(health["storage"]["kind"], json!("postgresql"), "{health}");
    let location = health["storage"]["location"].as_str().unwrap_or("");
    assert!(location.contains("schema many_"), "{health}");
    let stop = Arc::new(AtomicBool::new(false));
    let run_for = Duration::from_secs(8);

    let mut clients = Vec::new();
    for t in 0..SERVERS * CLIENTS_PER_SERVER {
        let port = ports[t % SERVERS];
        let stop = stop.clone();
        clients.push(std::thread::spawn(move || {
            // (name, value) of every acknowledged write of a unique key.
            let mut acked: Vec<(String, i64)> = Vec::new();
            let mut shared_acked = 0usize;
            let mut i: usize = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let a = (t * 7 + i) % SHARED_KEYS;
                let b = (t * 3 + i * 5) % SHARED_KEYS;
                let cmd = match i % 3 {
                    0 => format!(
                        r#"UPSERT {{ CONCEPT ?u {{ {{type: "Item", name: "u-{t}-{i}"}} SET ATTRIBUTES {{ n: {i} }} }} }}"#
                    ),
                    1 => format!(
                        r#"UPSERT {{ CONCEPT ?s {{ {{type: "Item", name: "shared-{a}"}} SET ATTRIBUTES {{ last: "{t}-{i}" }} }} }}"#
                    ),
                    _ => format!(
                        r#"UPSERT {{
                            CONCEPT ?a {{ {{type: "Item", name: "shared-{a}"}} }}
                            CONCEPT ?b {{ {{type: "Item", name: "shared-{b}"}} }}
                            PROPOSITION ?l {{ (?a, "near", ?b) }}
                        }}"#
                    ),
                };
                match post(port, &cmd) {
                    Some(r) if r.get("error").is_none() && r.get("result").is_some() => {
                        if i.is_multiple_of(3) {
                            acked.push((format!("u-{t}-{i}"), i as i64));
                        } else {
                            shared_acked += 1;
                        }
                    }
                    // The server is down (killed) or answered an error: not
                    // acknowledged, so nothing is owed.
                    _ => std::thread::sleep(Duration::from_millis(30)),
                }
            }
            (acked, shared_acked)
        }));
    }

    // Kill a server with SIGKILL every 1.2 s, in turn, and start it again.
    let started = Instant::now();
    let mut kills = 0;
    while started.elapsed() < run_for {
        std::thread::sleep(Duration::from_millis(1200));
        let k = kills % SERVERS;
        {
            let mut s = servers.lock().expect("servers");
            let _ = s[k].kill();
            let _ = s[k].wait();
            s[k] = start_server(&url, ports[k]);
        }
        kills += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let mut acked = Vec::new();
    let mut shared_acked = 0;
    for c in clients {
        let (a, s) = c.join().expect("client");
        acked.extend(a);
        shared_acked += s;
    }
    // A cursor from one server is good on another (behind a load balancer).
    let find = r#"FIND(?x.name) WHERE { ?x {type: "Item"} }"#;
    let first = post(ports[0], &format!("{find} LIMIT 100")).expect("page 1");
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_string();
    let second = post(ports[1], &format!("{find} LIMIT 100 CURSOR \"{cursor}\"")).expect("page 2");
    assert!(second.get("error").is_none(), "{second}");
    let both = post(ports[2], &format!("{find} LIMIT 200")).expect("both pages");
    let mut paged = first["result"].as_array().cloned().unwrap_or_default();
    paged.extend(second["result"].as_array().cloned().unwrap_or_default());
    assert_eq!(
        Value::Array(paged),
        both["result"],
        "pages from two servers"
    );
    for mut s in servers.lock().expect("servers").drain(..) {
        let _ = s.kill();
        let _ = s.wait();
    }
    assert!(kills >= 5, "only {kills} kills");
    assert!(
        acked.len() > 100 && shared_acked > 100,
        "too few writes acknowledged: {} unique, {shared_acked} shared",
        acked.len()
    );

    let n = Nexus::open_postgres(&url).expect("open");
    let rows = |cmd: &str| -> Vec<Value> {
        let r = n
            .execute_json(&json!({ "command": cmd }), Access::ReadOnly)
            .to_json();
        assert!(r.get("error").is_none(), "{cmd}: {r}");
        let rows = r["result"].as_array().cloned().unwrap_or_default();
        assert!(rows.len() < 10000, "more rows than one page: {cmd}");
        rows
    };
    eprintln!(
        "{kills} kills; acknowledged: {} unique keys, {shared_acked} shared-key writes",
        acked.len()
    );
    // Every acknowledged write of a unique key is there, with its value.
    // Two projections answer two columns.
    let cols = rows(r#"FIND(?x.name, ?x.attributes.n) WHERE { ?x {type: "Item"} } LIMIT 10000"#);
    let (names_col, values_col) = (
        cols[0].as_array().cloned().unwrap_or_default(),
        cols[1].as_array().cloned().unwrap_or_default(),
    );
    let items: BTreeMap<String, Value> = names_col
        .iter()
        .zip(values_col)
        .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v)))
        .collect();
    for (name, v) in &acked {
        assert_eq!(items.get(name), Some(&json!(v)), "acknowledged {name} lost");
    }
    // One concept per {type, name}; one link per (subject, predicate, object).
    let names: Vec<Value> = rows(r#"FIND(?x.name) WHERE { ?x {type: "Item"} } LIMIT 10000"#);
    let distinct: BTreeSet<String> = names.iter().map(|v| v.to_string()).collect();
    assert_eq!(distinct.len(), names.len(), "a {{type, name}} exists twice");
    let shared = names
        .iter()
        .filter(|v| v.as_str().is_some_and(|s| s.starts_with("shared-")))
        .count();
    assert!(shared <= SHARED_KEYS, "{shared} shared keys");
    let cols = rows(r#"FIND(?a.name, ?b.name) WHERE { ?l (?a, "near", ?b) } LIMIT 10000"#);
    let links: Vec<(Value, Value)> = cols[0]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .zip(cols[1].as_array().cloned().unwrap_or_default())
        .collect();
    assert!(!links.is_empty(), "no link was written");
    let pairs: BTreeSet<String> = links.iter().map(|(a, b)| format!("{a}>{b}")).collect();
    assert_eq!(pairs.len(), links.len(), "a link exists twice");
    drop(n);
    let (ok, out, err) = kip(&url, &["check"], None);
    assert!(ok, "kip check: {out}{err}");
}

#[test]
#[ignore = "needs PostgreSQL (KIP_TEST_PG_URL) with TLS (KIP_TEST_PG_CERT)"]
fn tls_is_used_and_the_server_certificate_is_verified() {
    let url = fresh_url("tls");
    let cert = std::env::var("KIP_TEST_PG_CERT")
        .unwrap_or_else(|_| panic!("KIP_TEST_PG_CERT: the test cluster's CA certificate; {NEEDS}"));
    let with = |extra: &str| {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}{extra}")
    };
    let find = r#"FIND(?p.name) WHERE { ?p {type: "Person", name: "$self"} }"#;
    // Verified against the cluster's self-signed certificate: connects.
    let r = exec_json(
        &with(&format!("sslmode=verify-full&sslrootcert={cert}")),
        find,
    );
    assert_eq!(r["result"], json!(["$self"]), "{r}");
    let r = exec_json(&with(&format!("sslmode=require&sslrootcert={cert}")), find);
    assert_eq!(r["result"], json!(["$self"]), "{r}");
    // verify-full without that certificate: it is not among the public roots, so the
    // connection is refused (which shows it is TLS: clear text has no certificate).
    let (ok, out, err) = kip(&with("sslmode=verify-full"), &["exec", find], None);
    assert!(!ok, "connected without trusting the certificate: {out}");
    assert!(err.contains("TLS"), "{err}");
    // Reached under a name the certificate is not for (hostaddr gives the address):
    // verify-full refuses it, verify-ca (the chain only) and a root file with require
    // accept it, as libpq does.
    let port = url
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .expect("the test URL's port");
    let renamed = url.replacen(
        &format!("127.0.0.1:{port}"),
        &format!("kip-db.invalid:{port}"),
        1,
    );
    let renamed = |extra: &str| format!("{renamed}&hostaddr=127.0.0.1&{extra}");
    let (ok, out, err) = kip(
        &renamed(&format!("sslmode=verify-full&sslrootcert={cert}")),
        &["exec", find],
        None,
    );
    assert!(
        !ok,
        "verify-full accepted a certificate for another name: {out}"
    );
    assert!(err.contains("TLS") || err.contains("certificate"), "{err}");
    for mode in ["verify-ca", "require"] {
        let r = exec_json(
            &renamed(&format!("sslmode={mode}&sslrootcert={cert}")),
            find,
        );
        assert_eq!(r["result"], json!(["$self"]), "{mode}: {r}");
    }
    // require without a root certificate: encrypted, the certificate not checked (as
    // libpq does); disable: clear text.
    let r = exec_json(&with("sslmode=require"), find);
    assert_eq!(r["result"], json!(["$self"]), "{r}");
    let r = exec_json(&with("sslmode=disable"), find);
    assert_eq!(r["result"], json!(["$self"]), "{r}");
}

#[test]
#[ignore = "needs PostgreSQL (KIP_TEST_PG_URL) with TLS (KIP_TEST_PG_CERT)"]
fn a_client_certificate_logs_in_where_only_certificates_are_accepted() {
    // scripts/pg-test-cluster.sh: the role kip_cert may log in over TLS with the
    // client certificate next to the CA's, and in no other way.
    let url = fresh_url("cert").replacen("://kip@", "://kip_cert@", 1);
    let ca = std::env::var("KIP_TEST_PG_CERT")
        .unwrap_or_else(|_| panic!("KIP_TEST_PG_CERT: the test cluster's CA certificate; {NEEDS}"));
    let dir = std::path::Path::new(&ca)
        .parent()
        .expect("the cluster's directory");
    let (cert, key) = (dir.join("client.crt"), dir.join("client.key"));
    let with = |extra: &str| {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}{extra}")
    };
    let find = r#"FIND(?p.name) WHERE { ?p {type: "Person", name: "$self"} }"#;
    let (ok, out, err) = kip(&with(&format!("sslrootcert={ca}")), &["exec", find], None);
    assert!(!ok, "logged in without a certificate: {out}");
    assert!(err.contains("certificate"), "{err}");
    let r = exec_json(
        &with(&format!(
            "sslmode=verify-full&sslrootcert={ca}&sslcert={}&sslkey={}",
            cert.display(),
            key.display()
        )),
        find,
    );
    assert_eq!(r["result"], json!(["$self"]), "{r}");
    // The same from the environment, as libpq reads it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kip"))
        .args([
            "--data",
            &with(&format!("sslrootcert={ca}")),
            "-q",
            "exec",
            find,
        ])
        .env("PGSSLCERT", &cert)
        .env("PGSSLKEY", &key)
        .output()
        .expect("kip");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A certificate without its key is refused before connecting.
    let (ok, _, err) = kip(
        &with(&format!("sslcert={}", cert.display())),
        &["exec", find],
        None,
    );
    assert!(!ok);
    assert!(err.contains("sslkey"), "{err}");
}

/// One audited read through `n` from interface `who`, its record appended at once.
fn audited_find(n: &Nexus, who: &str, i: usize) {
    n.execute_audited(
        &json!({ "command": format!("FIND(?p.name) WHERE {{ ?p {{type: \"Person\", name: \"{who}{i}\"}} }}") }),
        Access::ReadOnly,
        &kip_engine::Budget::default(),
        who,
    );
    n.admin().audit().flush().expect("flush");
}

#[test]
#[ignore = "needs PostgreSQL (KIP_TEST_PG_URL)"]
fn processes_sharing_a_database_share_one_audit_log_without_losing_records() {
    let url = fresh_url("audit");
    // Two processes' worth of nexus, each numbering its log from what it saw at start.
    let a = Nexus::open_postgres(&url).expect("a");
    let b = Nexus::open_postgres(&url).expect("b");
    for i in 0..3 {
        for (n, who) in [(&a, "a"), (&b, "b")] {
            audited_find(n, who, i);
        }
    }
    let (all, _) = a.admin().audit().list(None, 100).expect("list");
    let ids: Vec<&str> = all.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(all.len(), 6, "{all:?}");
    let distinct: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(distinct.len(), 6, "ids: {ids:?}");
    assert_eq!(
        ids,
        ["6", "5", "4", "3", "2", "1"],
        "newest first, numbered in order"
    );
    let from: Vec<&str> = all.iter().filter_map(|r| r["interface"].as_str()).collect();
    assert_eq!(from, ["b", "a", "b", "a", "b", "a"]);
}

#[test]
#[ignore = "needs PostgreSQL (KIP_TEST_PG_URL)"]
fn the_newest_records_kept_are_counted_in_the_shared_log() {
    let url = fresh_url("auditkeep");
    let a = Nexus::open_postgres(&url).expect("a");
    let b = Nexus::open_postgres(&url).expect("b");
    for n in [&a, &b] {
        n.admin().audit().configure(kip_engine::audit::AuditConfig {
            max_entries: 4,
            ..Default::default()
        });
    }
    // `a` writes 1..3; `b`, which numbered its log from 0 at start, appends three more
    // that become 4..6: keeping the newest 4 of the shared log leaves 3..6 (counted in
    // b's own numbering, 1..3, it would have dropped nothing).
    for i in 0..3 {
        audited_find(&a, "a", i);
    }
    for i in 0..3 {
        audited_find(&b, "b", i);
    }
    let (all, _) = a.admin().audit().list(None, 100).expect("list");
    let ids: Vec<&str> = all.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(ids, ["6", "5", "4", "3"], "{all:?}");
}

#[test]
#[ignore = "needs PostgreSQL (KIP_TEST_PG_URL)"]
fn a_write_waits_for_the_lock_a_bounded_time_and_reads_do_not_wait() {
    let url = fresh_url("lockwait");
    let w = exec_json(
        &url,
        r#"UPSERT { CONCEPT ?p { {type: "Person", name: "Held"} } }"#,
    );
    assert!(w.get("error").is_none(), "{w}");
    // Another session holds the writers' lock (as a process stopped mid-write would).
    let schema = url
        .rsplit("search_path%3D")
        .next()
        .expect("schema in the URL")
        .to_string();
    let key = kip_open::postgres::write_lock_key(&schema);
    let base = std::env::var("KIP_TEST_PG_URL").expect("url");
    let mut holder = postgres::Client::connect(&base, postgres::NoTls).expect("a session");
    let mut held = holder.transaction().expect("begin");
    held.execute("SELECT pg_advisory_xact_lock($1)", &[&key])
        .expect("the writers' lock");
    // Reads do not wait for writers.
    let r = exec_json(
        &url,
        r#"FIND(?p.name) WHERE { ?p {type: "Person", name: "Held"} }"#,
    );
    assert_eq!(r["result"], json!(["Held"]), "{r}");
    // A write gives up after KIP_PG_WRITE_WAIT seconds, saying why, and changes nothing.
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_kip"))
        .args([
            "--data",
            &url,
            "exec",
            r#"UPSERT { CONCEPT ?p { {type: "Person", name: "Late"} } }"#,
        ])
        .env("KIP_PG_WRITE_WAIT", "1")
        .output()
        .expect("kip");
    let waited = started.elapsed();
    let err =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("write lock"), "{err}");
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");
    held.rollback().expect("release");
    let r = exec_json(
        &url,
        r#"FIND(?p.name) WHERE { ?p {type: "Person", name: "Late"} }"#,
    );
    assert_eq!(r["result"], json!([]), "{r}");
}

#[test]
#[ignore = "needs PostgreSQL (KIP_TEST_PG_URL)"]
fn expect_version_guards_a_read_modify_write_across_processes() {
    let url = fresh_url("version");
    let create = r#"UPSERT { CONCEPT ?p { {type: "Person", name: "Vera"} EXPECT VERSION 0 SET ATTRIBUTES { n: 1 } } }"#;
    let w = exec_json(&url, create);
    assert!(w.get("error").is_none(), "{w}");
    // Two processes read version 1; the first to write wins, the second is refused.
    let r = exec_json(
        &url,
        r#"FIND(?p.metadata._version) WHERE { ?p {type: "Person", name: "Vera"} }"#,
    );
    assert_eq!(r["result"], json!([1]), "{r}");
    let bump = |n: u32| {
        format!(
            r#"UPSERT {{ CONCEPT ?p {{ {{type: "Person", name: "Vera"}} EXPECT VERSION 1 SET ATTRIBUTES {{ n: {n} }} }} }}"#
        )
    };
    let first = exec_json(&url, &bump(2));
    assert!(first.get("error").is_none(), "{first}");
    let second = exec_json(&url, &bump(3));
    assert_eq!(second["error"]["code"], json!("KIP_3005"), "{second}");
    let r = exec_json(
        &url,
        r#"FIND(?p.attributes.n, ?p.metadata._version) WHERE { ?p {type: "Person", name: "Vera"} }"#,
    );
    assert_eq!(r["result"], json!([[2], [2]]), "{r}");
    // EXPECT VERSION 0 creates once, across processes too.
    let again = exec_json(&url, create);
    assert_eq!(again["error"]["code"], json!("KIP_3005"), "{again}");
}

#[test]
#[ignore = "needs PostgreSQL (KIP_TEST_PG_URL)"]
fn kip_check_finds_damage_done_behind_its_back() {
    // Enough elements that the check reads them in several announced chunks.
    let url = fresh_url("damage");
    let mut capsule = String::from("UPSERT {\n");
    for i in 0..1200 {
        capsule.push_str(&format!(
            "CONCEPT ?c{i} {{ {{type: \"Person\", name: \"person {i}\"}} SET ATTRIBUTES {{ note: \"likes gardening {i}\" }} }}\n"
        ));
    }
    for i in 1..1200 {
        capsule.push_str(&format!(
            "PROPOSITION ?l{i} {{ (?c{i}, \"belongs_to_domain\", {{type: \"Domain\", name: \"CoreSchema\"}}) }}\n"
        ));
    }
    capsule.push('}');
    let (ok, out, err) = kip(&url, &["exec", "-f", "-"], Some(&capsule));
    assert!(ok, "{out}{err}");
    let (ok, out, err) = kip(&url, &["check"], None);
    assert!(ok, "a clean memory: {out}{err}");
    // Behind kip's back: one text index entry (element keys are stored with bit 63
    // flipped) and one link's subject gone.
    let (schema, mut db) = raw_session(&url);
    db.batch_execute(&format!(
        "SET search_path = {schema}; \
         DELETE FROM kip_postings WHERE ctid = (SELECT ctid FROM kip_postings WHERE elem = \
             (SELECT id FROM kip_concepts WHERE name = 'person 5'::bytea) - 9223372036854775807 - 1 LIMIT 1); \
         DELETE FROM kip_concepts WHERE id = (SELECT min(id) FROM kip_concepts WHERE name = 'person 700'::bytea); \
         UPDATE kip_concepts SET name = 'someone else'::bytea WHERE name = 'person 1100'::bytea"
    ))
    .expect("damage");
    let (ok, out, _) = kip(&url, &["check"], None);
    assert!(!ok, "the damage went unseen: {out}");
    assert!(out.contains("missing the text index term"), "{out}");
    assert!(out.contains("references missing C:"), "{out}");
    // The name column no longer matches the record's name: the name index check (many
    // names per query) sees the record's name without its entry.
    assert!(
        out.contains(r#"name \"person 1100\" index disagrees with the records: 1 entries missing"#),
        "{out}"
    );
}

#[test]
#[ignore = "needs PostgreSQL (KIP_TEST_PG_URL)"]
fn the_key_cache_of_each_process_follows_the_others_deletes_merges_and_rollbacks() {
    // Two nexuses on one database are two processes' key caches (`{type, name}` ->
    // concept, kept across transactions): what one does to a key, the other's next
    // statement sees.
    let url = fresh_url("keycache");
    let a = Nexus::open_postgres(&url).expect("a");
    let b = Nexus::open_postgres(&url).expect("b");
    let (run, ok) = (run_on, ok_on);
    let rank = r#"FIND(?p.attributes.n) WHERE { ?p {type: "Person", name: "Ada"} }"#;
    ok(
        &a,
        r#"UPSERT { CONCEPT ?t { {type: "$PropositionType", name: "knows"}
                     SET ATTRIBUTES { description: "knows", subject_types: ["*"], object_types: ["*"] } } }"#,
    );
    ok(
        &a,
        r#"UPSERT { CONCEPT ?a { {type: "Person", name: "Ada"} SET ATTRIBUTES { n: 1 } }
                     CONCEPT ?b { {type: "Person", name: "Bob"} SET ATTRIBUTES { n: 10 } } }"#,
    );
    // b learns Ada's and Bob's concepts (reads and a write's lookups).
    assert_eq!(ok(&b, rank), json!([1]));
    ok(
        &b,
        r#"UPSERT { PROPOSITION ?l { ({type: "Person", name: "Bob"}, "knows", {type: "Person", name: "Ada"}) } }"#,
    );

    // a deletes Ada and makes another Ada (a new concept number).
    ok(
        &a,
        r#"DELETE CONCEPT ?p DETACH WHERE { ?p {type: "Person", name: "Ada"} }"#,
    );
    assert_eq!(ok(&b, rank), json!([]), "b still finds the deleted Ada");
    ok(
        &a,
        r#"UPSERT { CONCEPT ?a { {type: "Person", name: "Ada"} SET ATTRIBUTES { n: 2 } } }"#,
    );
    assert_eq!(ok(&b, rank), json!([2]));
    // b's write links the new Ada, not the deleted one.
    ok(
        &b,
        r#"UPSERT { PROPOSITION ?l { ({type: "Person", name: "Bob"}, "knows", {type: "Person", name: "Ada"}) } }"#,
    );
    let known =
        r#"FIND(?o.attributes.n) WHERE { ?s {type: "Person", name: "Bob"} (?s, "knows", ?o) }"#;
    assert_eq!(ok(&a, known), json!([2]));

    // a merges Bob into a new Carl: b's Bob is gone, its links are Carl's.
    ok(
        &a,
        r#"UPSERT { CONCEPT ?c { {type: "Person", name: "Carl"} SET ATTRIBUTES { n: 30 } } }"#,
    );
    ok(
        &a,
        r#"MERGE CONCEPT ?s INTO ?t WHERE { ?s {type: "Person", name: "Bob"} ?t {type: "Person", name: "Carl"} }"#,
    );
    assert_eq!(
        ok(
            &b,
            r#"FIND(?p.name) WHERE { ?p {type: "Person", name: "Bob"} }"#
        ),
        json!([])
    );
    let r = run(
        &b,
        r#"UPSERT { PROPOSITION ?l { ({type: "Person", name: "Bob"}, "knows", {type: "Person", name: "Carl"}) } }"#,
    );
    assert!(r.get("error").is_some(), "a link from the merged Bob: {r}");

    // A write of b that fails after creating a concept files nothing: the concept
    // number it used is handed out again (to a's Dan), and b must not take Dan for
    // the rolled-back Eve.
    let r = run(
        &b,
        r#"UPSERT { CONCEPT ?e { {type: "Person", name: "Eve"} }
                    CONCEPT ?x { {type: "NoSuchType", name: "x"} } }"#,
    );
    assert!(r.get("error").is_some(), "{r}");
    ok(
        &a,
        r#"UPSERT { CONCEPT ?d { {type: "Person", name: "Dan"} } }"#,
    );
    assert_eq!(
        ok(
            &b,
            r#"FIND(?p.name) WHERE { ?p {type: "Person", name: "Eve"} }"#
        ),
        json!([])
    );
    assert_eq!(
        ok(
            &b,
            r#"FIND(?p.name) WHERE { ?p {type: "Person", name: "Dan"} }"#
        ),
        json!(["Dan"])
    );
    let (ok_check, out, err) = kip(&url, &["check"], None);
    assert!(ok_check, "{out}{err}");
}

#[test]
#[ignore = "needs PostgreSQL (KIP_TEST_PG_URL)"]
fn the_key_cache_sees_concept_rows_deleted_behind_kips_back() {
    // The key epoch is raised by triggers in the database, so a delete kip did not
    // make (an older kip's, an operator's) empties the caches too.
    let url = fresh_url("keyhand");
    let b = Nexus::open_postgres(&url).expect("b");
    let c = Nexus::open_postgres(&url).expect("c");
    let ok = ok_on;
    let find = r#"FIND(?p.attributes.n) WHERE { ?p {type: "Person", name: "Dan"} }"#;
    ok(
        &b,
        r#"UPSERT { CONCEPT ?d { {type: "Person", name: "Dan"} SET ATTRIBUTES { n: 4 } } }"#,
    );
    assert_eq!(ok(&b, find), json!([4]));
    let (schema, mut db) = raw_session(&url);
    // By hand, in a session whose search_path does not name the memory's schema.
    db.batch_execute(&format!(
        "DELETE FROM {schema}.kip_concepts WHERE name = 'Dan'::bytea"
    ))
    .expect("delete by hand");
    // c, which never saw the first Dan, makes another one (a new concept number).
    ok(
        &c,
        r#"UPSERT { CONCEPT ?d { {type: "Person", name: "Dan"} SET ATTRIBUTES { n: 5 } } }"#,
    );
    assert_eq!(ok(&b, find), json!([5]), "b answered from a stale key");
    let epoch: i64 = db
        .query_one(
            &format!(
                "SELECT n FROM {schema}.kip_stats WHERE key = convert_to('#key_epoch', 'UTF8')"
            ),
            &[],
        )
        .expect("the key epoch")
        .get(0);
    assert_eq!(epoch, 1, "one statement deleted concept rows");
}
