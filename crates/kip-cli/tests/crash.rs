//! Crash safety: a `kip exec --jsonl` process is killed with SIGKILL in the middle of a
//! long series of UPSERTs, at several points. After reopening, every acknowledged write
//! is present and no UPSERT is visible in part (the acknowledged writes since the last
//! checkpoint come back from the write-ahead log).

use kip_engine::{Access, Nexus};
use kip_open::Open;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

const SCHEMA: &str = r#"UPSERT {
    CONCEPT ?t { {type: "$ConceptType", name: "Item"} SET ATTRIBUTES { description: "test item" } }
    CONCEPT ?p { {type: "$PropositionType", name: "pairs_with"} SET ATTRIBUTES { description: "pairs", subject_types: ["Item"], object_types: ["Item"] } }
}"#;

/// Each write creates two concepts and a link between them, all or nothing.
fn write_cmd(i: usize) -> String {
    let upsert = format!(
        r#"UPSERT {{ CONCEPT ?a {{ {{type: "Item", name: "a{i}"}} SET ATTRIBUTES {{ i: {i}, payload: "{pad}" }} }} CONCEPT ?b {{ {{type: "Item", name: "b{i}"}} SET PROPOSITIONS {{ ("pairs_with", ?a) }} }} }}"#,
        pad = "x".repeat(200)
    );
    json!({ "command": upsert }).to_string()
}

fn count(n: &Nexus, cmd: &str) -> u64 {
    let r = n
        .execute_json(&json!({ "command": cmd }), Access::ReadOnly)
        .to_json();
    r["result"]
        .as_u64()
        .unwrap_or_else(|| panic!("{cmd} => {r}"))
}

fn run_and_kill(kill_after: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    Nexus::open(dir.path())
        .expect("create")
        .load_capsule(SCHEMA)
        .expect("schema");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kip"))
        .arg("--data")
        .arg(dir.path())
        .args(["exec", "--jsonl", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn kip");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    // Keep a few requests in flight so the kill lands while a commit may be under way.
    let total = kill_after + 50;
    let writer = std::thread::spawn(move || {
        for i in 0..total {
            if writeln!(stdin, "{}", write_cmd(i)).is_err() {
                break;
            }
        }
    });
    let mut acked = 0usize;
    let mut line = String::new();
    while acked < kill_after {
        line.clear();
        if stdout.read_line(&mut line).expect("read ack") == 0 {
            break;
        }
        let v: Value = serde_json::from_str(&line).expect("json ack");
        assert!(v.get("error").is_none(), "write {acked} failed: {v}");
        acked += 1;
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let _ = writer.join();
    // The acknowledged writes since the last checkpoint live in the write-ahead log:
    // the reopen below must replay them.
    if acked > 0 {
        let (_, recs) = kip_open::embedded::wal::Wal::open(&dir.path().join(kip_open::WAL_FILE))
            .expect("read the log");
        assert!(
            !recs.is_empty(),
            "no write-ahead log to replay after the kill"
        );
    }

    let n = Nexus::open(dir.path()).expect("reopen after kill");
    let problems = n.admin().check_integrity().expect("integrity");
    assert!(
        problems.is_empty(),
        "graph and indexes disagree after the kill: {problems:?}"
    );
    let a = count(
        &n,
        r#"FIND(COUNT(?x)) WHERE { ?x {type: "Item"} FILTER(STARTS_WITH(?x.name, "a")) }"#,
    );
    let b = count(
        &n,
        r#"FIND(COUNT(?x)) WHERE { ?x {type: "Item"} FILTER(STARTS_WITH(?x.name, "b")) }"#,
    );
    let links = count(&n, r#"FIND(COUNT(?l)) WHERE { ?l (?x, "pairs_with", ?y) }"#);
    assert!(
        a as usize >= acked,
        "kill after {kill_after}: {a} writes visible, {acked} acknowledged"
    );
    assert_eq!(a, b, "a partial UPSERT is visible");
    assert_eq!(a, links, "a partial UPSERT is visible");
    for i in 0..acked {
        let c = count(
            &n,
            &format!(
                r#"FIND(COUNT(?l)) WHERE {{ ?l ({{type: "Item", name: "b{i}"}}, "pairs_with", {{type: "Item", name: "a{i}"}}) }}"#
            ),
        );
        assert_eq!(c, 1, "acknowledged write {i} is missing");
    }
}

#[test]
fn killed_writer_loses_no_acknowledged_write_and_exposes_no_partial_one() {
    for kill_after in [1, 7, 40, 120] {
        run_and_kill(kill_after);
    }
}
