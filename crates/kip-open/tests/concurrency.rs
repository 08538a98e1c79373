//! Readers see consistent snapshots while a writer commits, and concurrent writers
//! never lose a write.

mod common;
use common::*;
use kip_open::Open;

use kip_engine::{Access, Nexus};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn schema(n: &Nexus) {
    ok(
        n,
        r#"UPSERT {
            CONCEPT ?t { {type: "$ConceptType", name: "Item"} SET ATTRIBUTES { description: "test item" } }
            CONCEPT ?p { {type: "$PropositionType", name: "pairs_with"} SET ATTRIBUTES { description: "pairs", subject_types: ["Item"], object_types: ["Item"] } }
        }"#,
    );
}

fn pair(i: usize, tag: &str) -> String {
    format!(
        r#"UPSERT {{ CONCEPT ?a {{ {{type: "Item", name: "{tag}a{i}"}} }} CONCEPT ?b {{ {{type: "Item", name: "{tag}b{i}"}} SET PROPOSITIONS {{ ("pairs_with", ?a) }} }} }}"#
    )
}

#[test]
fn readers_see_consistent_snapshots_while_a_writer_commits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = Arc::new(Nexus::open(dir.path()).expect("open"));
    schema(&n);
    let done = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..3 {
        let (n, done) = (n.clone(), done.clone());
        readers.push(std::thread::spawn(move || {
            let mut checks = 0;
            while !done.load(Ordering::SeqCst) || checks < 5 {
                n.read(|r| {
                    let items = r.stat(kip_engine::store::Stat::Type("Item"))?;
                    let links = r.stat(kip_engine::store::Stat::Predicate("pairs_with"))?;
                    assert_eq!(items, 2 * links, "a snapshot shows half a commit");
                    // The query engine on the same snapshot agrees with the statistics.
                    let mut seen = 0u64;
                    r.scan_predicate("pairs_with", &mut |_, _, _| {
                        seen += 1;
                        Ok(true)
                    })?;
                    assert_eq!(seen, links);
                    Ok(())
                })
                .expect("read");
                checks += 1;
            }
            checks
        }));
    }
    for i in 0..150 {
        ok(&n, &pair(i, ""));
    }
    done.store(true, Ordering::SeqCst);
    for r in readers {
        assert!(r.join().expect("reader") >= 5);
    }
    assert_eq!(
        ok(&n, r#"FIND(COUNT(?l)) WHERE { ?l (?x, "pairs_with", ?y) }"#),
        json!(150)
    );
}

#[test]
fn concurrent_writers_lose_nothing() {
    let n = Arc::new(nexus());
    schema(&n);
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let n = n.clone();
            std::thread::spawn(move || {
                for i in 0..40 {
                    let r = n
                        .execute_json(
                            &json!({"command": pair(i, &format!("w{w}"))}),
                            Access::ReadWrite,
                        )
                        .to_json();
                    assert!(r.get("error").is_none(), "{r}");
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer");
    }
    assert_eq!(
        ok(&n, r#"FIND(COUNT(?x)) WHERE { ?x {type: "Item"} }"#),
        json!(320)
    );
    assert_eq!(
        ok(&n, r#"FIND(COUNT(?l)) WHERE { ?l (?x, "pairs_with", ?y) }"#),
        json!(160)
    );
}

#[test]
fn concurrent_statements_stay_atomic_when_some_fail() {
    let n = Arc::new(nexus());
    schema(&n);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let n = n.clone();
            std::thread::spawn(move || {
                let mut ok_count = 0;
                for i in 0..30 {
                    // Every third statement fails in its last block (unknown type).
                    let tail = if i % 3 == 0 {
                        r#" CONCEPT ?z { {type: "Nope", name: "z"} }"#
                    } else {
                        ""
                    };
                    let cmd = format!(
                        r#"UPSERT {{ CONCEPT ?a {{ {{type: "Item", name: "t{t}-{i}"}} }}{tail} }}"#
                    );
                    let r = n
                        .execute_json(&json!({"command": cmd}), Access::ReadWrite)
                        .to_json();
                    if i % 3 == 0 {
                        assert_eq!(r["error"]["code"], "KIP_2001", "{r}");
                    } else {
                        assert!(r.get("error").is_none(), "{r}");
                        ok_count += 1;
                    }
                }
                ok_count
            })
        })
        .collect();
    let written: usize = threads.into_iter().map(|t| t.join().expect("thread")).sum();
    assert_eq!(written, 8 * 20);
    assert_eq!(
        ok(&n, r#"FIND(COUNT(?x)) WHERE { ?x {type: "Item"} }"#),
        json!(160)
    );
    for t in 0..8 {
        for i in (0..30).step_by(3) {
            let r = ok(
                &n,
                &format!(r#"FIND(COUNT(?x)) WHERE {{ ?x {{type: "Item", name: "t{t}-{i}"}} }}"#),
            );
            assert_eq!(r, json!(0), "a failed statement left t{t}-{i} behind");
        }
    }
    assert!(n.admin().check_integrity().expect("integrity").is_empty());
}

/// The same mix of succeeding and failing concurrent statements on disk: combined
/// batches go to the write-ahead log as one record each, and a crash snapshot taken
/// afterwards replays to exactly the graph the writers were told about.
#[test]
fn concurrent_writes_on_disk_replay_exactly_after_a_crash() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let live = tmp.path().join("live");
    let n = Arc::new(Nexus::open(&live).expect("open"));
    schema(&n);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let n = n.clone();
            std::thread::spawn(move || {
                for i in 0..25 {
                    let tail = if i % 4 == 0 {
                        r#" CONCEPT ?z { {type: "Nope", name: "z"} }"#
                    } else {
                        ""
                    };
                    let cmd = format!(
                        r#"UPSERT {{ CONCEPT ?a {{ {{type: "Item", name: "d{t}-{i}"}} SET ATTRIBUTES {{ i: {i} }} }} CONCEPT ?b {{ {{type: "Item", name: "e{t}-{i}"}} SET PROPOSITIONS {{ ("pairs_with", ?a) }} }}{tail} }}"#
                    );
                    let r = n
                        .execute_json(&json!({"command": cmd}), Access::ReadWrite)
                        .to_json();
                    assert_eq!(r.get("error").is_some(), i % 4 == 0, "{r}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    assert!(
        n.admin().wal_len() > 0,
        "the writes are in the log, not yet checkpointed"
    );
    let expected = n.admin().dump().expect("dump");
    // A crash now: the database file holds the last durable state, the log the rest.
    let crashed = tmp.path().join("crashed");
    std::fs::create_dir_all(&crashed).expect("mkdir");
    for f in [kip_open::DB_FILE, kip_open::WAL_FILE] {
        std::fs::copy(live.join(f), crashed.join(f)).expect("copy");
    }
    let r = Nexus::open(&crashed).expect("reopen");
    assert_eq!(r.admin().dump().expect("dump"), expected);
    assert_eq!(
        r.admin().check_integrity().expect("check"),
        Vec::<String>::new()
    );
    assert_eq!(
        ok(&r, r#"FIND(COUNT(?l)) WHERE { ?l (?x, "pairs_with", ?y) }"#),
        json!(8 * 18)
    );
}
