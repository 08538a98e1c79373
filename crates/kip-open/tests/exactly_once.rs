//! Exactly once (issue 45): a request sent again with its `request_id` is answered from
//! the request log, never applied twice, also after a crash; a failed statement records
//! nothing. The shared-directory failover with real processes is in kip-cli's tests.

mod common;
use common::nexus;
use kip_engine::{Access, Nexus};
use kip_open::Open;
use kip_open::{DB_FILE, WAL_FILE};
use serde_json::{json, Value};

fn send(n: &Nexus, args: Value) -> Value {
    n.execute_json(&args, Access::ReadWrite).to_json()
}

fn counter(n: &Nexus) -> Value {
    let r = send(
        n,
        json!({"command": r#"FIND(?c.attributes.n) WHERE { ?c {type: "Event", name: "counter"} }"#}),
    );
    r["result"][0].clone()
}

fn setup(n: &Nexus) {
    let r = send(
        n,
        json!({"command": r#"UPSERT { CONCEPT ?c { {type: "Event", name: "counter"} SET ATTRIBUTES { event_class: "Counter", start_time: "2026-01-01", content_summary: "c", n: 0 } } }"#}),
    );
    assert!(r.get("error").is_none(), "{r}");
}

fn increment(id: &str) -> Value {
    json!({
        "request_id": id,
        "commands": [
            r#"UPDATE ?c SET ATTRIBUTES { n: ADD(?c.attributes.n, 1) } WHERE { ?c {type: "Event", name: "counter"} }"#,
            r#"FIND(?c.attributes.n) WHERE { ?c {type: "Event", name: "counter"} }"#
        ]
    })
}

#[test]
fn a_request_sent_again_with_its_id_is_answered_not_applied_again() {
    let n = nexus();
    setup(&n);
    let first = send(&n, increment("req-1"));
    assert_eq!(
        first["result"][0]["result"],
        json!({"updated": 1, "matched": 1}),
        "{first}"
    );
    let again = send(&n, increment("req-1"));
    assert_eq!(
        again["result"][0], first["result"][0],
        "the write is answered as the first time"
    );
    assert_eq!(counter(&n), json!(1), "applied once");
    assert_eq!(again["result"][1]["result"], json!([1]), "reads run again");
    // Another id is another request.
    send(&n, increment("req-2"));
    assert_eq!(counter(&n), json!(2));
    // Without an id nothing is recorded: every send applies.
    let plain = json!({"command": r#"UPDATE ?c SET ATTRIBUTES { n: ADD(?c.attributes.n, 1) } WHERE { ?c {type: "Event", name: "counter"} }"#});
    send(&n, plain.clone());
    send(&n, plain);
    assert_eq!(counter(&n), json!(4));
}

/// The replayed answers of issue 45: an `EXPECT VERSION` UPSERT and a MERGE that were
/// applied answer as applied (they used to answer `KIP_3005` and `KIP_3002`).
#[test]
fn guarded_upserts_and_merges_replay_their_first_answer() {
    let n = nexus();
    setup(&n);
    let guarded = json!({
        "request_id": "guarded",
        "command": r#"UPSERT { CONCEPT ?c { {type: "Event", name: "counter"} EXPECT VERSION 1 SET ATTRIBUTES { n: 10 } } }"#
    });
    let first = send(&n, guarded.clone());
    assert!(first.get("error").is_none(), "{first}");
    assert_eq!(send(&n, guarded), first);
    assert_eq!(counter(&n), json!(10));
    let merge_setup = send(
        &n,
        json!({"command": r#"UPSERT { CONCEPT ?a { {type: "Person", name: "Ann"} } CONCEPT ?b { {type: "Person", name: "Anne"} } }"#}),
    );
    assert!(merge_setup.get("error").is_none(), "{merge_setup}");
    let merge = json!({
        "request_id": "merge-1",
        "command": r#"MERGE CONCEPT ?s INTO ?t WHERE { ?s {type: "Person", name: "Anne"} ?t {type: "Person", name: "Ann"} }"#
    });
    let first = send(&n, merge.clone());
    assert!(first.get("error").is_none(), "{first}");
    assert_eq!(send(&n, merge), first, "not KIP_3002");
}

/// A statement that fails changes nothing and records nothing: sent again once the
/// memory allows it, it runs.
#[test]
fn a_failed_statement_records_nothing() {
    let n = nexus();
    let link = json!({
        "request_id": "late",
        "command": r#"UPSERT { CONCEPT ?a { {type: "Person", name: "Ann"} SET PROPOSITIONS { ("prefers", {type: "Person", name: "Bob"}) } } }"#
    });
    let first = send(&n, link.clone());
    assert_eq!(
        first["error"]["code"], "KIP_3002",
        "Bob is missing: {first}"
    );
    send(
        &n,
        json!({"command": r#"UPSERT { CONCEPT ?b { {type: "Person", name: "Bob"} } }"#}),
    );
    let again = send(&n, link);
    assert!(again.get("error").is_none(), "{again}");
}

/// Statements combined into one transaction by the write combiner record each under
/// its own key.
#[test]
fn concurrent_requests_with_ids_each_apply_once() {
    let n = nexus();
    setup(&n);
    std::thread::scope(|s| {
        for t in 0..4 {
            let n = &n;
            s.spawn(move || {
                for i in 0..10 {
                    let id = format!("t{t}-{i}");
                    // Every request twice, the second possibly combined with the first.
                    send(n, increment(&id));
                    send(n, increment(&id));
                }
            });
        }
    });
    assert_eq!(counter(&n), json!(40));
}

/// The record is in the write-ahead log with the statement's writes: a crash right
/// after the acknowledgement replays both.
#[test]
fn the_record_survives_a_crash_with_its_writes() {
    if kip_open::testing::on_postgres() || kip_open::testing::on_memory_backend() {
        return; // the embedded store's log; PostgreSQL commits both in one transaction
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let live = tmp.path().join("live");
    let n = Nexus::open(&live).expect("open");
    setup(&n);
    let first = send(&n, increment("crash-1"));
    // Copy the files while the nexus is open: the state a kill -9 leaves.
    let crashed = tmp.path().join("crashed");
    std::fs::create_dir_all(&crashed).expect("mkdir");
    for f in [DB_FILE, WAL_FILE] {
        std::fs::copy(live.join(f), crashed.join(f)).expect("copy");
    }
    drop(n);
    let m = Nexus::open(&crashed).expect("reopen after the crash");
    assert_eq!(counter(&m), json!(1));
    let again = send(&m, increment("crash-1"));
    assert_eq!(again["result"][0], first["result"][0]);
    assert_eq!(counter(&m), json!(1), "not applied again after the replay");
}

#[test]
fn a_malformed_request_id_is_refused_before_anything_runs() {
    let n = nexus();
    for bad in [json!(""), json!(7), json!("a\nb"), json!("x".repeat(129))] {
        let r = send(
            &n,
            json!({"request_id": bad, "command": r#"UPSERT { CONCEPT ?a { {type: "Person", name: "Zed"} } }"#}),
        );
        assert_eq!(r["error"]["code"], "KIP_1001", "{r}");
    }
    let r = send(
        &n,
        json!({"command": r#"FIND(COUNT(?a)) WHERE { ?a {type: "Person", name: "Zed"} }"#}),
    );
    assert_eq!(r["result"], json!(0));
}
